/*
 * sysmem.c -- how much memory this process may still use: the kernel's
 * MemAvailable (/proc/meminfo), or its cgroup's limit less what the cgroup
 * already uses when that is lower (cgroup v2 memory.max and memory.current,
 * or v1 memory.limit_in_bytes and memory.usage_in_bytes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"

/* the first unsigned number in a small file; 0 when missing or "max" */
static uint64_t read_u64(const char *path)
{
    char buf[64];
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (buf[0] < '0' || buf[0] > '9') return 0;
    return strtoull(buf, NULL, 10);
}

static uint64_t meminfo_available(void)
{
    char line[256];
    uint64_t kb = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", (unsigned long long *)&kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

/* limit and usage from files dir/<lim> and dir/<use>; 0 when no limit */
static uint64_t limit_in(const char *dir, const char *lim_file, const char *use_file, uint64_t *used)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, lim_file);
    uint64_t lim = read_u64(path);
    if (lim >= (1ULL << 60)) lim = 0;                 /* cgroup v1 writes "no limit" as a huge number */
    if (lim) {
        snprintf(path, sizeof path, "%s/%s", dir, use_file);
        *used = read_u64(path);
    }
    return lim;
}

/* room left in this process's cgroup; 0 when unlimited or unknown */
static uint64_t cgroup_room(void)
{
    char line[4096], dir[4352];
    uint64_t lim = 0, used = 0;
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (f) {
        while (!lim && fgets(line, sizeof line, f)) {
            line[strcspn(line, "\n")] = 0;
            char *path = strchr(line, ':'), *ctl = path ? path + 1 : NULL;
            if (!ctl || !(path = strchr(ctl, ':'))) continue;
            *path++ = 0;
            if (!*ctl) {                                  /* v2: "0::/path" */
                snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", path);
                lim = limit_in(dir, "memory.max", "memory.current", &used);
            } else if (!strcmp(ctl, "memory")) {          /* v1: "N:memory:/path" */
                snprintf(dir, sizeof dir, "/sys/fs/cgroup/memory%s", path);
                lim = limit_in(dir, "memory.limit_in_bytes", "memory.usage_in_bytes", &used);
            }
        }
        fclose(f);
    }
    if (!lim) lim = limit_in("/sys/fs/cgroup", "memory.max", "memory.current", &used);
    if (!lim) lim = limit_in("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes", &used);
    if (!lim) return 0;
    return lim > used ? lim - used : 1;
}

remat_status remat_memory_available(uint64_t *bytes, const char **source)
{
    if (!bytes) return remat_fail(REMAT_ERR_INVALID, "remat_memory_available: bytes is NULL");
    uint64_t avail = meminfo_available(), room = cgroup_room();
    const char *src = "MemAvailable";
    if (room && (!avail || room < avail)) {
        avail = room;
        src = "the cgroup's memory.max less its memory.current";
    }
    *bytes = avail;
    if (source) *source = src;
    if (!avail) return remat_fail(REMAT_ERR_IO, "cannot read the available memory (/proc/meminfo, /sys/fs/cgroup)");
    return REMAT_OK;
}
