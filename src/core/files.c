/*
 * files.c -- writing files so that a reader never sees half of one,
 * sweeping up what killed writers left, and reading a whole file with a
 * size cap.
 *
 * A file is written as PATH.tmp.PID (PID: the writer's process id), synced,
 * renamed over PATH, and the directory synced, so PATH is either the old
 * file or the whole new one (rename(2) is atomic).  A writer killed before
 * its rename leaves its PATH.tmp.PID behind; the next writer deletes such
 * files when their process is gone (a live writer's file is left alone).
 * Every writer of the library -- remat_write_file_atomic, the weights and
 * the checkpoint writers -- goes through remat_atomic_begin/commit (the
 * checkpoint writer, which sweeps the temporary files of every step itself
 * first, through remat_atomic_begin_swept), and every sweep through
 * remat_sweep_tmps.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "core.h"

/* splits path into its directory (".", "/" or the part before the last
 * '/') and base name; 0 when path is too long for dir */
static int split_path(const char *path, char *dir, size_t cap, const char **base)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) return snprintf(dir, cap, ".") < (int)cap;
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n + 1 > cap) return 0;
    memcpy(dir, path, n);
    dir[n] = 0;
    return 1;
}

long remat_tmp_suffix_pid(const char *s)
{
    if (strncmp(s, ".tmp.", 5)) return 0;
    const char *digits = s + 5;
    char *end;
    errno = 0;
    long pid = strtol(digits, &end, 10);
    if (*digits < '0' || *digits > '9' || *end || errno || pid <= 0) return 0;
    return pid;
}

void remat_sweep_tmps(const char *dir, long (*tmp_pid)(const char *name, const void *arg), const void *arg)
{
    char file[8192];
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid = tmp_pid(de->d_name, arg);
        if (pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno == EPERM) continue;   /* its writer is alive */
        if (snprintf(file, sizeof file, "%s/%s", dir, de->d_name) < (int)sizeof file) unlink(file);
    }
    closedir(d);
}

/* "BASE.tmp.PID" -> PID; arg is BASE */
static long base_tmp_pid(const char *name, const void *arg)
{
    const char *base = arg;
    size_t nb = strlen(base);
    return strncmp(name, base, nb) ? 0 : remat_tmp_suffix_pid(name + nb);
}

/* remat_atomic_begin, sweeping path's directory first when sweep is set */
static remat_status atomic_begin(remat_atomic_file *a, const char *path, int sweep)
{
    char dir[4096];
    const char *base;
    a->f = NULL;
    a->path[0] = a->tmp[0] = 0;
    if (!path || !*path) return remat_fail(REMAT_ERR_INVALID, "no file path to write");
    if (strlen(path) >= sizeof a->path || !split_path(path, dir, sizeof dir, &base) || !*base)
        return remat_fail(REMAT_ERR_INVALID, "'%.200s' is not a file path that can be written", path);
    if (sweep) remat_sweep_tmps(dir, base_tmp_pid, base);
    memcpy(a->path, path, strlen(path) + 1);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(a->tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return remat_fail(REMAT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    if (!(a->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        unlink(a->tmp);
        return remat_fail(REMAT_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    return REMAT_OK;
}

remat_status remat_atomic_begin(remat_atomic_file *a, const char *path) { return atomic_begin(a, path, 1); }

remat_status remat_atomic_begin_swept(remat_atomic_file *a, const char *path) { return atomic_begin(a, path, 0); }

void remat_atomic_abort(remat_atomic_file *a)
{
    if (!a->f) return;
    fclose(a->f);
    a->f = NULL;
    unlink(a->tmp);
}

remat_status remat_atomic_commit(remat_atomic_file *a)
{
    if (!a->f) return remat_fail(REMAT_ERR_STATE, "remat_atomic_commit: no file begun");
    int e = 0;
    errno = 0;
    if (ferror(a->f)) e = EIO;   /* a write failed without the caller noticing */
    if (!e && fflush(a->f) != 0) e = errno ? errno : EIO;
    if (!e && fsync(fileno(a->f)) != 0) e = errno;
    if (fclose(a->f) != 0 && !e) e = errno ? errno : EIO;
    a->f = NULL;
    if (!e && rename(a->tmp, a->path) != 0) e = errno;
    if (e) {
        unlink(a->tmp);
        return remat_fail(REMAT_ERR_IO, "cannot write '%s': %s", a->path, strerror(e));
    }
    /* the rename is durable once the directory is; some file systems refuse
     * fsync on a directory (EINVAL, EROFS), which is not an error */
    char dir[4096];
    const char *base;
    split_path(a->path, dir, sizeof dir, &base);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        int r = fsync(dfd);
        e = errno;
        close(dfd);
        if (r != 0 && e != EINVAL && e != EROFS)
            return remat_fail(REMAT_ERR_IO, "cannot sync the directory of '%s': %s", a->path, strerror(e));
    }
    return REMAT_OK;
}

remat_status remat_write_file_atomic(const char *path, const void *data, size_t len)
{
    remat_atomic_file a;
    remat_status st;
    if (!path || !*path || (!data && len))
        return remat_fail(REMAT_ERR_INVALID, "remat_write_file_atomic: no path or data");
    if ((st = remat_atomic_begin(&a, path))) return st;
    errno = 0;
    if (len && fwrite(data, 1, len, a.f) != len) {
        int e = errno ? errno : EIO;
        remat_atomic_abort(&a);
        return remat_fail(REMAT_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    return remat_atomic_commit(&a);
}

int remat_mkdirs(const char *path, int parent_only)
{
    char buf[4096];
    if (strlen(path) >= sizeof buf) { errno = ENAMETOOLONG; return -1; }
    strcpy(buf, path);
    if (parent_only) {
        char *slash = strrchr(buf, '/');
        if (!slash || slash == buf) return 0;
        *slash = 0;
    }
    for (char *c = buf + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return -1;
        *c = '/';
    }
    if (mkdir(buf, 0755) && errno != EEXIST) return -1;
    struct stat sb;
    if (stat(buf, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) { errno = ENOTDIR; return -1; }
    return 0;
}

remat_status remat_read_file(const char *path, size_t max, char **buf, size_t *n)
{
    remat_status st = REMAT_OK;
    char *b = NULL;
    size_t len = 0, cap = 4096;
    if (!buf || !n) return remat_fail(REMAT_ERR_INVALID, "remat_read_file: NULL argument");
    *buf = NULL;
    *n = 0;
    if (!path) return remat_fail(REMAT_ERR_INVALID, "remat_read_file: path is NULL");
    if (max > SIZE_MAX - 2) max = SIZE_MAX - 2;
    FILE *f = fopen(path, "rb");
    if (!f) return remat_fail(REMAT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    /* a regular file's size, plus the byte that shows the end, is read at
     * once; anything else (a pipe, a file that grows) doubles the buffer */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0 && (uint64_t)sb.st_size >= cap)
        cap = (uint64_t)sb.st_size < max ? (size_t)sb.st_size + 1 : max + 1;
    if (cap > max + 1) cap = max + 1;
    for (;;) {
        char *nb = remat_realloc(b, cap + 1);
        if (!nb) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading '%s' (%zu bytes)", path, cap); goto out; }
        b = nb;
        errno = 0;
        len += fread(b + len, 1, cap - len, f);
        if (ferror(f)) {
            st = remat_fail(REMAT_ERR_IO, "cannot read '%s': %s", path, errno ? strerror(errno) : "read error");
            goto out;
        }
        if (len < cap) break;   /* the end of the file */
        if (len > max) { st = remat_fail(REMAT_ERR_FORMAT, "'%s' is larger than %zu bytes", path, max); goto out; }
        cap = cap > max / 2 ? max + 1 : 2 * cap;
    }
    b[len] = 0;
    *buf = b;
    *n = len;
    b = NULL;
out:
    fclose(f);
    free(b);
    return st;
}
