/* capi_stubs.c: parts of include/moects.h not implemented yet (they fail with a message). */
#include "capi_internal.h"

int moects_worker_serve(int rfd, int wfd, const moects_kernel *const *kernels, size_t n)
{
    (void)rfd, (void)wfd, (void)kernels, (void)n;
    moects__set_error("moects_worker_serve: not implemented yet");
    return 2;
}

const char *moects_task_json(void) { return ""; }
int moects_task_tensor(int j, moects_tensor_info *t)
{
    (void)j, (void)t;
    return -1;
}
void *moects_task_stream(void) { return NULL; }
