/* fuzz_image.c - libFuzzer target: arbitrary bytes as an ELF file for
 * btr_image_add_elf, then code reads, symbol lookups (symbol tables, PLT
 * decoding), build-id and load-bias reading.  The image API takes paths,
 * so the input goes to a memfd and is opened as /proc/self/fd/N.  Source
 * lines (btr_image_line, through libdw) are looked up for inputs whose
 * first byte after the ELF magic region is odd, so that most executions
 * stay on btr's own ELF code while btr's use of the DWARF line tables is
 * still reached.  The same bytes are also added as a raw file image
 * (btr_image_add_file) at a few offsets. */
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
				if (size > 8 && (data[7] & 1)) {
					const char *file;
					int line;
					if (btr_image_line(img, a, &file, &line) == 0 && file)
						(void)(volatile char)file[0];
				}
			}
		}
	}
	/* raw file: mapped, not copied; reads must stop at the file's end */
	btr_image_free(img);
	if (btr_image_new(&img) != 0)
		return 0;
	uint64_t off = size > 3 ? data[size - 1] % size : 0;
	if (btr_image_add_file(img, path, off, 0, 0x10000) == 0) {
		uint8_t buf[64];
		const uint8_t *p;
		size_t avail;
		for (uint64_t a = 0x10000 - 8; a < 0x10000 + size + 8; a += 61) {
			int n = btr_image_read(img, a, buf, sizeof(buf));
			if (n > (int)sizeof(buf))
				__builtin_trap();
			if (btr_image_map(img, a, &p, &avail) == 0 && avail)
				(void)(volatile uint8_t)p[avail - 1];
		}
	}
	uint8_t id[64];
	uint64_t bias;
	btr_elf_build_id(path, id, sizeof(id));
	btr_elf_load_bias(path, base, 0, &bias);
	btr_image_free(img);
	return 0;
}
