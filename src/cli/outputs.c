/*
 * outputs.c -- the files and directories a command writes at its end
 * (--out, --trace, --svg-*), checked or created before it runs, so that a
 * long run does not fail at its last step for a missing directory.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"

int cli_mkdirs(const char *flag, const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return cli_error("%s: path too long", flag);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) return cli_error("cannot create %s: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) && errno != EEXIST) return cli_error("cannot create %s: %s", p, strerror(errno));
    struct stat st;
    if (stat(p, &st) || !S_ISDIR(st.st_mode)) return cli_error("%s %s is not a directory", flag, p);
    return 0;
}

int cli_check_output(const char *flag, const char *path)
{
    char dir[4096];
    struct stat st;
    const char *slash = strrchr(path, '/');
    if (!*path) return cli_error("%s needs a file name", flag);
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if (snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= (int)sizeof dir)
        return cli_error("%s: path too long", flag);
    if (stat(dir, &st) || access(dir, W_OK))
        return cli_error("%s %s: cannot write into %s: %s", flag, path, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return cli_error("%s %s: %s is not a directory", flag, path, dir);
    if (!stat(path, &st) && S_ISDIR(st.st_mode)) return cli_error("%s %s is a directory", flag, path);
    return 0;
}
