/*
 * files.c -- writing files so that a reader never sees half of one.
 *
 * A file is written as PATH.tmp.PID (PID: the writer's process id), synced,
 * renamed over PATH, and the directory synced, so PATH is either the old
 * file or the whole new one.  A writer killed before its rename leaves its
 * PATH.tmp.PID behind; the next writer of PATH deletes such files when their
 * process is gone (a live writer's file is left alone).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void remat_remove_stale_tmps(const char *path)
{
    char dir[4096], file[8192];
    const char *base;
    if (!path || !split_path(path, dir, sizeof dir, &base) || !*base) return;
    size_t nb = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        if (strncmp(nm, base, nb) || strncmp(nm + nb, ".tmp.", 5)) continue;
        const char *digits = nm + nb + 5;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (*digits < '0' || *digits > '9' || *end || errno || pid <= 0) continue;
        if (pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno == EPERM) continue;   /* its writer is alive */
        if (snprintf(file, sizeof file, "%s/%s", dir, nm) < (int)sizeof file) unlink(file);
    }
    closedir(d);
}

remat_status remat_write_file_atomic(const char *path, const void *data, size_t len)
{
    char tmp[4096 + 32], dir[4096];
    const char *base;
    if (!path || !*path || (!data && len)) return remat_fail(REMAT_ERR_INVALID, "remat_write_file_atomic: no path or data");
    if (strlen(path) >= 4096 || !split_path(path, dir, sizeof dir, &base) || !*base)
        return remat_fail(REMAT_ERR_INVALID, "'%.200s' is not a file path that can be written", path);
    remat_remove_stale_tmps(path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return remat_fail(REMAT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    const char *p = data;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            close(fd);
            unlink(tmp);
            return remat_fail(REMAT_ERR_IO, "cannot write %s: %s", path, strerror(e));
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return remat_fail(REMAT_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return remat_fail(REMAT_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);   /* the rename is durable once the directory is */
    if (dfd >= 0) {
        int r = fsync(dfd), e = errno;
        close(dfd);
        if (r != 0 && e != EINVAL) return remat_fail(REMAT_ERR_IO, "cannot sync the directory of %s: %s", path, strerror(e));
    }
    return REMAT_OK;
}
