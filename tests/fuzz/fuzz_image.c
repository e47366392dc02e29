/* fuzz_image.c - libFuzzer target: arbitrary bytes as an ELF file for
 * btr_image_add_elf, then code reads, symbol lookups (symbol tables, PLT
 * decoding), build-id and load-bias reading.  The image API takes paths,
 * so the input goes to a memfd and is opened as /proc/self/fd/N.  DWARF
 * (libdw) is left out: it would fuzz elfutils, not btr. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "btr/btr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("fuzz_image", 0);
		if (fd < 0)
			return 0;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;

	struct btr_image *img;
	if (btr_image_new(&img) != 0)
		return 0;
	uint64_t base = 0x555555554000ull;
	if (btr_image_add_elf(img, path, base, 1) == 0) {
		/* Probe addresses around the base and the usual ET_EXEC base. */
		static const uint64_t probes[] = { 0, 0x40, 0x1000, 0x1040, 0x2000, 0x401000, 0x400000 };
		for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
			for (int k = 0; k < 2; k++) {
				uint64_t a = probes[i] + (k ? base : 0);
				uint8_t buf[32];
				const uint8_t *p;
				size_t avail;
				struct btr_symbol sym;
				char name[128];
				if (btr_image_map(img, a, &p, &avail) == 0 && avail)
					(void)(volatile uint8_t)p[avail - 1];
				btr_image_read(img, a, buf, sizeof(buf));
				if (btr_image_symbol(img, a, &sym) == 0 && sym.name)
					(void)(volatile char)sym.name[0];
				btr_image_symbolize(img, a, name, sizeof(name));
			}
		}
	}
	uint8_t id[64];
	uint64_t bias;
	btr_elf_build_id(path, id, sizeof(id));
	btr_elf_load_bias(path, base, 0, &bias);
	btr_image_free(img);
	return 0;
}
