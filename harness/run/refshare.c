/* refshare.c: a case's references shared by every worker that runs one of its tasks (issue 31, item 4;
 * DESIGN.md "Harness": isolation). A worker keeps a case's inputs and references across the case's
 * kernels; a kernel that kills its worker (a crash, a sticky CUDA error, a kernel that kept memory)
 * took them with it, and the fresh worker that runs the case's next task computed the reference
 * again. Now the worker that computed a reference also writes it, before any later kernel runs, to a
 * file of the run's share directory (RAM-backed /dev/shm where it can), and a worker without it reads
 * it back there: a header naming the case (its index, an FNV-1a of its id, the seed), the recipe, the
 * size and the XXH64 of the bytes, checked when read, so a file a dying kernel garbled is recomputed,
 * never trusted. The parent makes the directory, removes a case's files when its last task is over and
 * the directory at the end of the run. Best effort: a file that cannot be written or read costs the
 * recomputation, never a verdict. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moects_harness.h"
#include "moects_task_internal.h"

#define SHARE_MAGIC 0x6d6f6572u /* "moer" */

typedef struct {
    uint32_t magic, recipe;
    uint64_t seed, id_hash, bytes, xxh64;
    int32_t gpu, check; /* the worker's ref_gpu and ref_check of the reference */
} share_hdr;

static uint64_t id_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static void share_path(char *buf, size_t len, const char *dir, long ci, int recipe)
{
    snprintf(buf, len, "%s/c%ld.r%d", dir, ci, recipe);
}

int moects__refshare_mkdir(char *dir, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    const char *bases[2] = {"/dev/shm", tmp && *tmp ? tmp : "/tmp"};
    for (int i = 0; i < 2; i++) {
        if (access(bases[i], W_OK) != 0) continue;
        snprintf(dir, len, "%s/moects-ref-XXXXXX", bases[i]);
        if (mkdtemp(dir)) return 0;
    }
    dir[0] = '\0';
    return -1;
}

static int write_all(int fd, const void *p, size_t n)
{
    for (const char *c = p; n;) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) return -1;
        c += w, n -= (size_t)w;
    }
    return 0;
}

int moects__refshare_put(const char *dir, long ci, const char *id, uint64_t seed, int recipe, const void *ref,
                         size_t bytes, uint64_t xxh64, int gpu, int check)
{
    char path[4300], tmp[4400];
    share_path(path, sizeof path, dir, ci, recipe);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    const share_hdr h = {SHARE_MAGIC, (uint32_t)recipe, seed, id_hash(id), bytes, xxh64, gpu, check};
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    int rc = write_all(fd, &h, sizeof h) || write_all(fd, ref, bytes) ? -1 : 0;
    if (close(fd) != 0) rc = -1;
    if (rc == 0 && rename(tmp, path) != 0) rc = -1;
    if (rc) unlink(tmp); /* a full file system: the next worker computes it again */
    return rc;
}

static int read_all(int fd, void *p, size_t n)
{
    for (char *c = p; n;) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) return -1;
        c += r, n -= (size_t)r;
    }
    return 0;
}

void *moects__refshare_get(const char *dir, long ci, const char *id, uint64_t seed, int recipe, size_t bytes,
                           uint64_t *xxh64, int *gpu, int *check)
{
    char path[4300];
    share_path(path, sizeof path, dir, ci, recipe);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    share_hdr h;
    void *buf = NULL;
    if (read_all(fd, &h, sizeof h) == 0 && h.magic == SHARE_MAGIC && h.recipe == (uint32_t)recipe && h.seed == seed &&
        h.id_hash == id_hash(id) && h.bytes == bytes && (buf = malloc(bytes ? bytes : 1)) &&
        (read_all(fd, buf, bytes) != 0 || moects__xxh64(buf, bytes) != h.xxh64))
        free(buf), buf = NULL;
    close(fd);
    if (buf) *xxh64 = h.xxh64, *gpu = h.gpu, *check = h.check;
    return buf;
}

void moects__refshare_drop(const char *dir, long ci, unsigned recipes)
{
    char path[4300];
    for (int r = 0; r < 32; r++)
        if (recipes & (1u << r)) share_path(path, sizeof path, dir, ci, r), unlink(path);
}

void moects__refshare_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    char path[4400];
    for (struct dirent *e; d && (e = readdir(d));) /* what a killed worker left (its .tmp) */
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) snprintf(path, sizeof path, "%s/%s", dir, e->d_name), unlink(path);
    if (d) closedir(d);
    rmdir(dir);
}
