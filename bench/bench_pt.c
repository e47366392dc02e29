/* bench_pt.c - Intel PT packet decoding throughput: btr vs libipt.
 *
 * Generates a stream of at least 100 MB with our encoder in a realistic
 * mix (modelled on real Skylake traces: mostly 1-byte TNT, TIP with
 * compressed IPs, MTC and CYC timing packets, PSB+ every 4 KiB), then
 * decodes it packet by packet with btr_pt_pkt_next (whole buffer, and fed
 * in 64 KiB pieces), with btr_pt_pkt_next_batch and btr_pt_pkt_next_compact
 * (256 packets per call) and with libipt's pt_pkt_next, and prints GB/s
 * side by side; then the same for the real Skylake recording repeated.
 * Every loop reads each packet's type and payload.  Before timing, the
 * batch and compact outputs are checked byte for byte against
 * btr_pt_pkt_next on the whole stream (exit 1 on a difference).
 * Usage: bench_pt [MB] (default 128).  Build with
 * -DCMAKE_BUILD_TYPE=Release for meaningful numbers.
 */
#include "btr/pt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef BTR_HAVE_LIBIPT
#include <intel-pt.h>
#endif

static uint64_t rng = 0x853c49e6748fea9bull;
static inline uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* CPU time of this thread: the machine is shared, and wall time would
 * count the time other processes ran on our core. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* PSB+ as the hardware writes it: PSB, FUP, MODE.Exec, TSC, TMA, CBR, PSBEND. */
static void psb_plus(struct btr_pt_encoder *e, uint64_t ip, uint64_t tsc)
{
	struct btr_pt_packet p = { .type = BTR_PT_PSB };
	btr_pt_enc_packet(e, &p);
	btr_pt_enc_ip(e, BTR_PT_FUP, ip);
	p = (struct btr_pt_packet){ .type = BTR_PT_MODE_EXEC, .u.mode_exec = { 1, 0, 0 } };
	btr_pt_enc_packet(e, &p);
	p = (struct btr_pt_packet){ .type = BTR_PT_TSC, .u.tsc = { tsc } };
	btr_pt_enc_packet(e, &p);
	p = (struct btr_pt_packet){ .type = BTR_PT_TMA, .u.tma = { (uint16_t)tsc, 0x1a } };
	btr_pt_enc_packet(e, &p);
	p = (struct btr_pt_packet){ .type = BTR_PT_CBR, .u.cbr = { 0x1c } };
	btr_pt_enc_packet(e, &p);
	p = (struct btr_pt_packet){ .type = BTR_PT_PSBEND };
	btr_pt_enc_packet(e, &p);
}

static size_t generate(uint8_t *buf, size_t size, size_t *npackets)
{
	/* Branch targets: 256 functions in a 2 MiB text segment and 32 in a
	 * shared library far away, so TIPs compress to 16 or 32 bits mostly
	 * and sometimes need sext48. */
	uint64_t targets[288];
	struct btr_pt_encoder e;
	size_t next_psb = 0, n = 0;
	uint64_t tsc = 0x1234567890ull;
	uint8_t mtc = 0;

	for (int i = 0; i < 256; i++)
		targets[i] = 0x401000 + (rnd() % 0x200000);
	for (int i = 256; i < 288; i++)
		targets[i] = 0x7f3a12000000ull + (rnd() % 0x400000);
	btr_pt_enc_init(&e, buf, size);
	while (btr_pt_enc_size(&e) + 64 < size) {
		unsigned r = (unsigned)(rnd() % 1000);
		struct btr_pt_packet p;

		if (btr_pt_enc_size(&e) >= next_psb) {
			psb_plus(&e, targets[rnd() % 288], tsc += 100000);
			next_psb += 4096;
			n += 7;
			continue;
		}
		n++;
		/* The mix of the Skylake recording quipper/perf.data.intel_pt-4.14
		 * (`btr pt dump --stats`: 66% tnt.8, 19% pad, 11.5% tip, 2.7% mtc,
		 * the rest fup/pip/tsc/...), plus CYC and long TNT, which that
		 * recording did not enable. */
		if (r < 640) {              /* 64% 1-byte TNT */
			p = (struct btr_pt_packet){ .type = BTR_PT_TNT, .size = 1 };
			p.u.tnt.count = (uint8_t)(1 + rnd() % 6);
			p.u.tnt.bits = rnd();
		} else if (r < 645) {       /* 0.5% long TNT */
			p = (struct btr_pt_packet){ .type = BTR_PT_TNT, .size = 8 };
			p.u.tnt.count = (uint8_t)(7 + rnd() % 41);
			p.u.tnt.bits = rnd();
		} else if (r < 760) {       /* 11.5% TIP (returns, indirect calls) */
			unsigned t = (unsigned)(rnd() % 100);
			btr_pt_enc_ip(&e, BTR_PT_TIP, targets[t < 90 ? rnd() % 256 : 256 + rnd() % 32]);
			continue;
		} else if (r < 765) {       /* 0.5% FUP (interrupts, ...) */
			btr_pt_enc_ip(&e, BTR_PT_FUP, targets[rnd() % 256] + rnd() % 64);
			continue;
		} else if (r < 767) {       /* 0.2% TIP.PGD / TIP.PGE pairs */
			p = (struct btr_pt_packet){ .type = BTR_PT_TIP_PGD, .u.ip = { 0, 0, 0 } };
			btr_pt_enc_packet(&e, &p);
			btr_pt_enc_ip(&e, BTR_PT_TIP_PGE, targets[rnd() % 256]);
			n++;
			continue;
		} else if (r < 794) {       /* 2.7% MTC */
			p = (struct btr_pt_packet){ .type = BTR_PT_MTC, .u.mtc = { mtc++ } };
		} else if (r < 804) {       /* 1% CYC, 1-3 bytes */
			p = (struct btr_pt_packet){ .type = BTR_PT_CYC };
			p.u.cyc.value = rnd() % (r & 1 ? 32 : 20000);
		} else if (r < 994) {       /* 19% PAD */
			p = (struct btr_pt_packet){ .type = BTR_PT_PAD };
		} else if (r < 998) {       /* 0.4% PIP (context switch) */
			p = (struct btr_pt_packet){ .type = BTR_PT_PIP, .u.pip = { 0x1d2e3000 + (rnd() % 16) * 0x1000, 0 } };
		} else {                    /* 0.2% TSC */
			p = (struct btr_pt_packet){ .type = BTR_PT_TSC, .u.tsc = { tsc += 1000 } };
		}
		btr_pt_enc_packet(&e, &p);
	}
	*npackets = n;
	return btr_pt_enc_size(&e);
}

/* Decodes everything with btr; returns the packet count and folds the
 * payloads into *@sum so the work cannot be optimized away. */
static size_t run_btr(const uint8_t *buf, size_t len, size_t piece, uint64_t *sum)
{
	struct btr_pt_pkt_decoder d;
	struct btr_pt_packet p;
	size_t n = 0, pos;
	uint64_t s = 0;

	pos = piece && piece < len ? piece : len;
	btr_pt_pkt_init(&d, buf, pos, 0);
	for (;;) {
		int r = btr_pt_pkt_next(&d, &p);
		if (r > 0) {
			n++;
			s += p.type + p.u.tsc.tsc;
			continue;
		}
		if ((r != -BTR_ERR_EOS && r != -BTR_ERR_AGAIN) || pos == len)
			break;
		size_t end = pos + piece < len ? pos + piece : len;
		btr_pt_pkt_feed(&d, buf + pos, end - pos);
		pos = end;
	}
	*sum = s;
	return n;
}

/* The same with btr_pt_pkt_next_batch, 256 packets at a time. */
static size_t run_btr_batch(const uint8_t *buf, size_t len, uint64_t *sum)
{
	static struct btr_pt_packet pk[256];
	struct btr_pt_pkt_decoder d;
	size_t n = 0;
	uint64_t s = 0;
	int r;

	btr_pt_pkt_init(&d, buf, len, 0);
	while ((r = btr_pt_pkt_next_batch(&d, pk, 256)) > 0) {
		for (int i = 0; i < r; i++)
			s += pk[i].type + pk[i].u.tsc.tsc;
		n += (size_t)r;
	}
	*sum = s;
	return n;
}

/* The same with btr_pt_pkt_next_compact, 256 packets at a time: type,
 * size, offset (base + off) and payload of every packet, as with the
 * others. */
static size_t run_btr_compact(const uint8_t *buf, size_t len, uint64_t *sum)
{
	static struct btr_pt_cpkt pk[256];
	struct btr_pt_pkt_decoder d;
	size_t n = 0;
	uint64_t s = 0, base;
	int r;

	btr_pt_pkt_init(&d, buf, len, 0);
	while ((r = btr_pt_pkt_next_compact(&d, pk, 256, &base)) > 0) {
		for (int i = 0; i < r; i++)
			s += pk[i].type + pk[i].payload;
		n += (size_t)r;
	}
	*sum = s;
	return n;
}

/* Untimed: btr_pt_pkt_next_batch and btr_pt_pkt_next_compact (expanded)
 * must give exactly the packets btr_pt_pkt_next gives, byte for byte
 * (fuzz_pt checks the batch on small inputs; this checks both on the
 * whole stream).  Returns 0 or 1 (printed). */
static int verify(const uint8_t *buf, size_t len)
{
	static struct btr_pt_packet pk[256];
	static struct btr_pt_cpkt cp[256];
	struct btr_pt_pkt_decoder d1, d2, d3;
	struct btr_pt_packet p, q;
	uint64_t base = 0;
	int n2 = 0, i2 = 0, n3 = 0, i3 = 0, r;
	size_t k = 0;

	btr_pt_pkt_init(&d1, buf, len, 0);
	btr_pt_pkt_init(&d2, buf, len, 0);
	btr_pt_pkt_init(&d3, buf, len, 0);
	for (;; k++) {
		memset(&p, 0, sizeof(p));
		r = btr_pt_pkt_next(&d1, &p);
		if (i2 == n2) {
			memset(pk, 0, sizeof(pk));
			n2 = btr_pt_pkt_next_batch(&d2, pk, 97 + (int)(k % 160));
			i2 = 0;
		}
		if (i3 == n3) {
			n3 = btr_pt_pkt_next_compact(&d3, cp, 97 + (int)((k * 7) % 160), &base);
			i3 = 0;
		}
		if (r <= 0) {
			if (n2 > 0 || n3 > 0 || n2 != r || n3 != r) {
				fprintf(stderr, "bench_pt: verify: packet %zu: next %d, batch %d, compact %d\n", k, r, n2, n3);
				return 1;
			}
			return 0;
		}
		if (n2 <= 0 || memcmp(&p, &pk[i2], sizeof(p))) {
			fprintf(stderr, "bench_pt: verify: batch differs at packet %zu (offset %" PRIu64 ")\n", k, p.offset);
			return 1;
		}
		if (n3 <= 0 || btr_pt_cpkt_expand(&cp[i3], base, &q) || memcmp(&p, &q, sizeof(p))) {
			fprintf(stderr, "bench_pt: verify: compact differs at packet %zu (offset %" PRIu64 ")\n", k, p.offset);
			return 1;
		}
		i2++, i3++;
	}
}

#ifdef BTR_HAVE_LIBIPT
static size_t run_ipt(const uint8_t *buf, size_t len, uint64_t *sum)
{
	struct pt_config cfg;
	struct pt_packet_decoder *dec;
	struct pt_packet p;
	size_t n = 0;
	uint64_t s = 0;

	pt_config_init(&cfg);
	cfg.begin = (uint8_t *)buf;
	cfg.end = (uint8_t *)buf + len;
	dec = pt_pkt_alloc_decoder(&cfg);
	if (!dec || pt_pkt_sync_set(dec, 0) < 0)
		return 0;
	while (pt_pkt_next(dec, &p, sizeof(p)) > 0) {
		n++;
		s += (uint64_t)p.type + p.payload.tsc.tsc;
	}
	pt_pkt_free_decoder(dec);
	*sum = s;
	return n;
}
#endif

/* Times every decoder on @buf; all must decode the same number of packets. */
static int measure(const char *label, const uint8_t *buf, size_t len)
{
	double t, best_btr = 1e9, best_piece = 1e9, best_batch = 1e9, best_compact = 1e9;
	size_t npk = 0, n;
	uint64_t sum;

	if (verify(buf, len))
		return 1;
	for (int rep = 0; rep < 3; rep++) {
		t = now();
		n = run_btr(buf, len, 0, &sum);
		t = now() - t;
		if (rep == 0)
			npk = n;
		if (t < best_btr)
			best_btr = t;
		t = now();
		if (run_btr(buf, len, 65536, &sum) != npk) {
			fprintf(stderr, "bench_pt: btr (64 KiB pieces) decoded a different packet count\n");
			return 1;
		}
		t = now() - t;
		if (t < best_piece)
			best_piece = t;
		t = now();
		if (run_btr_batch(buf, len, &sum) != npk) {
			fprintf(stderr, "bench_pt: btr (batch) decoded a different packet count\n");
			return 1;
		}
		t = now() - t;
		if (t < best_batch)
			best_batch = t;
		t = now();
		if (run_btr_compact(buf, len, &sum) != npk) {
			fprintf(stderr, "bench_pt: btr (compact) decoded a different packet count\n");
			return 1;
		}
		t = now() - t;
		if (t < best_compact)
			best_compact = t;
	}
	printf("%s: %.1f MB, %zu packets (%.2f bytes/packet)\n", label, len / 1e6, npk, (double)len / npk);
	printf("  btr    pt_pkt_next:            %6.2f GB/s  %7.1f Mpackets/s\n", len / best_btr / 1e9,
	       npk / best_btr / 1e6);
	printf("  btr    pt_pkt_next, 64K feeds: %6.2f GB/s  %7.1f Mpackets/s\n", len / best_piece / 1e9,
	       npk / best_piece / 1e6);
	printf("  btr    pt_pkt_next_batch:      %6.2f GB/s  %7.1f Mpackets/s\n", len / best_batch / 1e9,
	       npk / best_batch / 1e6);
	printf("  btr    pt_pkt_next_compact:    %6.2f GB/s  %7.1f Mpackets/s\n", len / best_compact / 1e9,
	       npk / best_compact / 1e6);
#ifdef BTR_HAVE_LIBIPT
	double best_ipt = 1e9;
	for (int rep = 0; rep < 2; rep++) {
		t = now();
		n = run_ipt(buf, len, &sum);
		t = now() - t;
		if (n != npk) {
			fprintf(stderr, "bench_pt: libipt decoded %zu packets, btr %zu\n", n, npk);
			return 1;
		}
		if (t < best_ipt)
			best_ipt = t;
	}
	printf("  libipt pt_pkt_next:            %6.2f GB/s  %7.1f Mpackets/s\n", len / best_ipt / 1e9,
	       npk / best_ipt / 1e6);
	printf("  speedup btr/libipt: %.2fx (pt_pkt_next), %.2fx (batch), %.2fx (compact)\n", best_ipt / best_btr,
	       best_ipt / best_batch, best_ipt / best_compact);
#else
	printf("  libipt: not available in this build\n");
#endif
	return 0;
}

/* The AUXTRACE payloads of the Skylake recording, repeated to @size bytes
 * (each payload starts with a PSB and ends at a packet boundary). */
static size_t real_stream(uint8_t *buf, size_t size)
{
	const char *path = BTR_SHARED_DIR "/traces/quipper/perf.data.intel_pt-4.14";
	FILE *f = fopen(path, "rb");
	static uint8_t file[1 << 20];
	size_t fsize, len = 0, one = 0;
	uint64_t pos, end;

	if (!f)
		return 0;
	fsize = fread(file, 1, sizeof(file), f);
	fclose(f);
	if (fsize < 56 || memcmp(file, "PERFILE2", 8))
		return 0;
	memcpy(&pos, file + 40, 8);          /* perf_file_header.data.offset */
	memcpy(&end, file + 48, 8);
	end += pos;
	if (end > fsize)
		return 0;
	while (pos + 8 <= end) {
		uint32_t type;
		uint16_t hsize;
		uint64_t sz;

		memcpy(&type, file + pos, 4);
		memcpy(&hsize, file + pos + 6, 2);
		if (hsize < 8)
			break;
		if (type != 71) {            /* PERF_RECORD_AUXTRACE */
			pos += hsize;
			continue;
		}
		memcpy(&sz, file + pos + 8, 8);
		if (pos + hsize + sz > end || one + sz > size)
			break;
		memcpy(buf + one, file + pos + hsize, sz);
		one += sz;
		pos += hsize + sz;
	}
	if (!one)
		return 0;
	for (len = one; len + one <= size; len += one)
		memcpy(buf + len, buf, one);
	return len;
}

int main(int argc, char **argv)
{
	size_t mb = argc > 1 ? (size_t)strtoul(argv[1], NULL, 0) : 128;
	size_t size = mb << 20, len, npk;
	uint8_t *buf = malloc(size);
	int ret;

	if (!buf || mb < 1) {
		fprintf(stderr, "bench_pt: cannot allocate %zu MB\n", mb);
		return 1;
	}
	len = generate(buf, size, &npk);
	ret = measure("synthetic (Skylake mix, PSB+ every 4 KiB)", buf, len);
	len = real_stream(buf, size);
	if (len)
		ret |= measure("real Skylake PT (quipper perf.data AUX, repeated)", buf, len);
	else
		printf("real Skylake PT: quipper/perf.data.intel_pt-4.14 absent, skipped\n");
	free(buf);
	return ret;
}
