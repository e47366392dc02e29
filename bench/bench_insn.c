/* bench_insn.c - throughput of btr_insn_decode (linear sweep over a real
 * .text section) against plain Zydis decoding, and of BTS decoding.
 *
 *   bench_insn [ELF-file] [rounds]
 * default: /usr/lib/x86_64-linux-gnu/libc.so.6, 5 rounds.
 */
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <Zydis/Zydis.h>

#include "btr/btr.h"

/* lib/image/insn_priv.h (not on the bench include path): Zydis-only decoding. */
int btr__insn_decode_zydis(const uint8_t *bytes, size_t size, uint64_t ip,
			   enum btr_exec_mode mode, struct btr_insn *out);

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint8_t *load_text(const char *path, size_t *size, uint64_t *addr)
{
	int fd = open(path, O_RDONLY);
	Elf *e;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	uint8_t *out = NULL;

	if (fd < 0)
		return NULL;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_getshdrstrndx(e, &shstrndx))
		goto done;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(e, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".text"))
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			break;
		out = malloc(d->d_size);
		memcpy(out, d->d_buf, d->d_size);
		*size = d->d_size;
		*addr = sh.sh_addr;
		break;
	}
done:
	if (e)
		elf_end(e);
	close(fd);
	return out;
}

static int count_cb(void *ctx, const struct btr_branch *b)
{
	(*(uint64_t *)ctx) += b->kind;
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/usr/lib/x86_64-linux-gnu/libc.so.6";
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	size_t size = 0;
	uint64_t addr = 0, ninsn = 0, nbranch = 0, nbad = 0;
	uint8_t *text = load_text(path, &size, &addr);
	double t0, t_btr, t_zmin, t_zfull;
	ZydisDecoder zd;
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];

	if (!text) {
		fprintf(stderr, "bench_insn: no .text in %s\n", path);
		return 1;
	}

	/* btr_insn_decode: minimal-mode Zydis + classification */
	t0 = now();
	for (int r = 0; r < rounds; r++) {
		for (size_t off = 0; off < size;) {
			struct btr_insn in;
			int n = btr_insn_decode(text + off, size - off, addr + off, BTR_MODE_64, &in);

			if (n <= 0) {
				nbad++;
				off++;
				continue;
			}
			ninsn++;
			nbranch += in.kind != BTR_KIND_NONE;
			off += (size_t)n;
		}
	}
	t_btr = now() - t0;

	printf("%s .text: %zu bytes, %" PRIu64 " insns/round (%" PRIu64 " branches, %" PRIu64 " undecodable)\n",
	       path, size, ninsn / rounds, nbranch / rounds, nbad / rounds);
	printf("btr_insn_decode            : %6.1f ns/insn  %6.1f Minsn/s\n", t_btr * 1e9 / ninsn, ninsn / t_btr / 1e6);
	{
		uint64_t n2 = 0;
		t0 = now();
		for (int r = 0; r < rounds; r++)
			for (size_t off = 0; off < size;) {
				struct btr_insn in;
				int n = btr__insn_decode_zydis(text + off, size - off, addr + off, BTR_MODE_64, &in);

				off += n > 0 ? (size_t)n : 1;
				n2++;
			}
		t0 = now() - t0;
		printf("btr_insn_decode, Zydis only : %6.1f ns/insn\n", t0 * 1e9 / n2);
	}

	ZydisDecoderInit(&zd, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	t0 = now();
	for (int r = 0; r < rounds; r++)
		for (size_t off = 0; off < size;) {
			if (ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zd, NULL, text + off, size - off, &zi)))
				off += zi.length;
			else
				off++;
		}
	t_zmin = now() - t0;
	t0 = now();
	for (int r = 0; r < rounds; r++)
		for (size_t off = 0; off < size;) {
			if (ZYAN_SUCCESS(ZydisDecoderDecodeFull(&zd, text + off, size - off, &zi, ops)))
				off += zi.length;
			else
				off++;
		}
	t_zfull = now() - t0;

	printf("zydis full-mode, no operands: %6.1f ns/insn\n", t_zmin * 1e9 / ninsn);
	printf("zydis full-mode + operands  : %6.1f ns/insn\n", t_zfull * 1e9 / ninsn);

	/* BTS: records pointing into the .text, classified through an image */
	{
		struct btr_image *img;
		size_t nrec = 1000000;
		uint8_t *buf = malloc(nrec * BTR_BTS_RECORD_SIZE);
		uint64_t sum = 0;
		int got;

		btr_image_new(&img);
		btr_image_add_bytes(img, text, size, addr);
		srand(1);
		for (size_t i = 0; i < nrec; i++) {
			uint64_t from = addr + (uint64_t)rand() % size;
			btr_bts_encode(from, from + 16, i & 1, buf + i * BTR_BTS_RECORD_SIZE);
		}
		t0 = now();
		got = btr_bts_decode(buf, nrec * BTR_BTS_RECORD_SIZE, img, 1, count_cb, &sum);
		t0 = now() - t0;
		printf("btr_bts_decode (with image): %d records, %6.1f ns/record, %6.1f MB/s\n", got,
		       t0 * 1e9 / nrec, nrec * BTR_BTS_RECORD_SIZE / t0 / 1e6);
		t0 = now();
		got = btr_bts_decode(buf, nrec * BTR_BTS_RECORD_SIZE, NULL, 1, count_cb, &sum);
		t0 = now() - t0;
		printf("btr_bts_decode (no image)  : %d records, %6.1f ns/record\n", got, t0 * 1e9 / nrec);
		btr_image_free(img);
		free(buf);
	}
	free(text);
	return 0;
}
