/* moects_guard.h: memory is part of the contract (DESIGN.md "Harness", issue 13). Every buffer a
 * kernel sees sits between guard regions; outputs get fresh poison before each run; CPU kernels run
 * in a child process per call, so heap damage dies with the call. harness/run/guard.c. */
#ifndef MOECTS_GUARD_H
#define MOECTS_GUARD_H
#include <stddef.h>
#include <stdint.h>

#include "moects_harness.h"
#include "moects_inputs.h"
#include "moects_kernel.h"


/* Where a guarded buffer lives: host, private; CUDA device; host, shared (outputs: a forked child's
 * writes are seen by its parent; inputs: a fork copies none of their page table, and the child
 * maps them read-only). */
enum { MOECTS_GUARD_HOST = 0, MOECTS_GUARD_DEVICE = 1, MOECTS_GUARD_SHARED = 2 };
/* Allocate a guarded buffer of bytes (0: data NULL, nothing mapped) whose canaries are at least
 * max(4096, row) bytes (the host's upper side is a guard page), where says MOECTS_GUARD_*.
 * 0, or -1 when out of memory. */
int moects__guard_alloc(moects_guarded *g, const char *name, size_t bytes, size_t row, int where);
/* Host buffer: data and canaries read-only in this process (a write faults at the write). 0 or -1. */
int moects__guard_readonly(const moects_guarded *g);
void moects__guard_free(moects_guarded *g);
/* XXH64 (seed 0) of host memory p[len], as moects__xxh64, reading never-touched pages of its mapping as
 * the zeros they are without faulting them in (harness/model/buffer.c). */
uint64_t moects__guard_xxh64(const void *p, size_t len);
/* Fill both canaries with byte c. 0, or -1 (device error). */
int moects__guard_arm(moects_guarded *g, unsigned char c);
/* Whether the canaries still hold their byte: 0 intact; 1 with "NAME: write before the start (byte
 * offset -N)" / "after the end (byte offset +N)" in why, N counted from the data's first byte
 * back, or from its end on; -1 (device error, in why). */
int moects__guard_check(const moects_guarded *g, char *why, size_t len);
/* The guarded host buffer whose mapping holds addr: 1 with "NAME: before the start (byte offset -N)",
 * "NAME: after the end (byte offset +N)" or "NAME: inside, at byte offset N" in why, else 0. */
int moects__guard_locate(const moects_guarded *g, size_t n, const void *addr, char *why, size_t len);

/* Bytes of one row of input slot i (or of the output, i = -1) of the case: the guard's minimum. */
size_t moects__guard_row_bytes(const moects_inputs *in, int i);

/* Poison pattern `run` (0, 1, ...) of an output of dtype dt over bytes: NaN bit patterns of the
 * type that differ from run to run (0xFFFF/0xFFFFFFFF, then 0x7FDE/0x7FE7809E, ...). Host memory. */
void moects__poison_fill(void *p, size_t bytes, moects_dtype dt, int run);
/* The bits of poison pattern `run` of dtype dt (BF16 in the low 16): what moects__poison_fill writes
 * (harness/model/values.c). */
uint32_t moects__poison_value(moects_dtype dt, int run);
/* Whether bits (BF16 in the low 16) are a poison pattern of run 0 or 1, or the Python package's
 * empty_output(): an element still holding one was most likely never written (harness/model/values.c). */
int moects__is_poison(moects_dtype dt, uint32_t bits);

/* The result of one CPU kernel call in a child process (moects__guard_cpu_call). */
typedef struct {
    int returned;         /* 1: run() returned (rc holds its value) and the child exited */
    int rc;               /* run()'s return, when it returned */
    int signo;            /* the signal that ended the child, 0 when it exited */
    int exit_status;      /* the child's exit status when it exited (exit() inside run: returned 0) */
    int fault_write;      /* SIGSEGV/SIGBUS: 1 the access was a write, 0 a read, -1 unknown */
    const void *fault_addr;
    char error[200];      /* the kernel's last_error() text after a non-zero return */
    size_t kept_heap, kept_vm; /* host heap and address space run() left in use in the child (bytes) */
} moects_cpu_call;

/* Memory in use by this process: host heap (glibc mallinfo2: arena + mmapped chunks; a sanitizer's
 * allocator reports none), the address space mapped (/proc/self/statm), and with dev the device's
 * free memory (has_dev 0 when it cannot be read). */
typedef struct {
    size_t heap, vm, dev_free;
    int has_dev;
} moects_mem_probe;
moects_mem_probe moects__mem_now(int dev);

/* Run k->run(shape, args) in a forked child (the parent's heap never sees the kernel's stray
 * writes; outputs live in shared guarded mappings so the parent sees what the kernel wrote). The
 * buffers ro[0..nro) (the inputs) are read-only in the child: a write into one faults at the write.
 * The child dies with the parent. 0, or -1 when fork fails. */
int moects__guard_cpu_call(const moects_kernel *k, const void *shape, const void *args, const moects_guarded *ro,
                          size_t nro, moects_cpu_call *out);

#endif
