/*
 * replay.c -- runs a fuzz target without libFuzzer: every file named on the
 * command line, and every file in every directory named, is passed to
 * LLVMFuzzerTestOneInput once, in name order.  A property failure or a crash
 * ends the run non-zero, and so does a directory with no file in it: a
 * corpus that is empty (or a path that names the wrong one) would replay
 * nothing and pass.  On success it prints how many inputs it replayed.
 *
 *   fuzz_<name> DIR|FILE...
 */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return -1; }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b) { free(buf); buf = NULL; }
            buf = b;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) { free(buf); fprintf(stderr, "replay: cannot read %s\n", path); return -1; }
    /* an exact-size copy, so that ASan sees reads past the input's end */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return -1; }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) { fprintf(stderr, "replay: cannot open %s\n", dir); return -1; }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *p);
            if (!p) break;
            names = p;
        }
        names[n++] = strdup(de->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_name);
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            int r = replay_file(path);
            if (r < 0) count = -1000000;
            count += r;
        }
        free(names[i]);
    }
    free(names);
    if (count == 0) {
        fprintf(stderr, "replay: %s holds no inputs; a corpus needs at least one file\n", dir);
        return -1;
    }
    return count;
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]); return 2; }
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) { fprintf(stderr, "replay: no such path %s\n", argv[i]); return 2; }
        int r = S_ISDIR(sb.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]);
        if (r < 0) return 1;
        total += r;
    }
    printf("%s: replayed %d inputs\n", argv[0], total);
    return 0;
}
