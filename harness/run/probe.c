/* probe.c: the visible CUDA devices asked of a throwaway child process (moects__probe_devices,
 * moects_runner.h), so that the parent of a run never initialises CUDA (DESIGN.md "Harness"). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "moects_device.h"
#include "moects_runner.h"
#include "moects_task_internal.h"

void moects__probe_devices(moects_device_info *d)
{
    memset(d, 0, sizeof *d);
    int p[2];
    if (pipe(p) != 0) {
        snprintf(d->why, sizeof d->why, "device probe: pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(d->why, sizeof d->why, "device probe: fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid == 0) {
        close(p[0]);
        dup2(2, 1);
        moects_device_info c;
        memset(&c, 0, sizeof c);
        c.count = moects__cuda_device_count(c.why, sizeof c.why);
        if (c.count > 0) {
            char e[128];
            if (moects__cuda_set_device(0, e, sizeof e) == 0) moects__cuda_device_name(c.name, sizeof c.name);
        }
        moects__write_full(p[1], &c, sizeof c);
        _exit(0);
    }
    close(p[1]);
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    int r = poll(&pf, 1, 120000);
    if (r <= 0 || moects__read_full(p[0], d, sizeof *d) != 1) {
        memset(d, 0, sizeof *d);
        snprintf(d->why, sizeof d->why, "device probe %s", r <= 0 ? "timed out" : "died");
        kill(pid, SIGKILL);
    }
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (d->count < 0) d->count = 0;
    d->why[sizeof d->why - 1] = d->name[sizeof d->name - 1] = '\0';
}
