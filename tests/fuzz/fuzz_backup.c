/*
 * libFuzzer target for the archives `yard admin restore` reads
 * (src/master/backup.h): any bytes must be restored or refused with a
 * message, never crash, and never write outside the data dir restored
 * into (a name of the archive cannot lead out of it). The inputs are
 * written to a file under $TMPDIR and restored into a fresh data dir there.
 *
 *   CC=clang meson setup build-fuzz -Db_sanitize=address,undefined -Db_lundef=false
 *   ninja -C build-fuzz tests/fuzz/fuzz_backup
 *   build-fuzz/tests/fuzz/fuzz_backup -max_total_time=60
 */
#include "base/compat.h"

#include <dirent.h>

#include "base/fsutil.h"
#include "base/xalloc.h"
#include "master/backup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[256];

/* The names in root: "in" and "data" alone, whatever was restored. */
static void check_root(void)
{
	DIR *d = opendir(root);
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "in") &&
		    strcmp(de->d_name, "data")) {
			fprintf(stderr, "fuzz_backup: the restore wrote '%s/%s', outside its data dir\n", root,
				de->d_name);
			abort();
		}
	if (d)
		closedir(d);
}

static void remove_root(void)
{
	rm_rf(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct backup_settings s = { 0 };
	struct backup_report rep;
	struct errbuf eb = ERRBUF_INIT;
	char *file, *data_dir;

	if (!root[0]) {
		const char *tmp = getenv("TMPDIR");
		snprintf(root, sizeof(root), "%s/yard-fuzz-backup-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(root))
			abort();
		atexit(remove_root);
	}
	file = xasprintf("%s/in", root);
	data_dir = xasprintf("%s/data", root);
	if (write_file_replace(file, data, size, 0600))
		abort();
	s.data_dir = data_dir;
	if (backup_restore(&s, file, false, &rep, &eb) && !eb.msg[0]) {
		fprintf(stderr, "fuzz_backup: a refusal without a message\n");
		abort();
	}
	check_root();
	rm_rf(data_dir);
	unlink(file);
	free(file);
	free(data_dir);
	return 0;
}
