/* sqlite_driver.c - bench/pgo.sh's second subject: SQLite (the amalgamation
 * from the npm registry, a parser and a bytecode VM) running the SQL of a
 * file against an in-memory database.  Prints the number of result rows
 * and a checksum of their text, so the variants can be compared. */
#include <stdio.h>
#include <stdlib.h>
#include "sqlite3.h"

static unsigned long long rows, sum;

static int on_row(void *ctx, int n, char **val, char **col)
{
	(void)ctx;
	(void)col;
	rows++;
	for (int i = 0; i < n; i++)
		for (const char *p = val[i] ? val[i] : ""; *p; p++)
			sum = sum * 131 + (unsigned char)*p;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s FILE.sql\n", argv[0]);
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	static char sql[1 << 20];
	size_t n = fread(sql, 1, sizeof(sql) - 1, f);
	fclose(f);
	sql[n] = 0;
	sqlite3 *db;
	if (sqlite3_open(":memory:", &db) != SQLITE_OK)
		return 1;
	char *err = NULL;
	if (sqlite3_exec(db, sql, on_row, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "%s: %s\n", argv[1], err);
		return 1;
	}
	sqlite3_close(db);
	printf("%llu rows, checksum %llx\n", rows, sum);
	return 0;
}
