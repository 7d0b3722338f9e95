/* ep_dispatch_mutants.c: CPU ep_dispatch_combine kernels with one known bug each, the EP bugs issue 33
 * names: a send count off by one, the last chunk dropped, the combine's weights applied on the wrong
 * rank (the expert's instead of the token's) or on both. Each declares the honest kernel's recipe and
 * runs its rank loop (gpu/cpu/ep_dispatch.c) with the bug switched on. */
#include "ep_dispatch_internal.h"

#define REC "ep_dispatch_combine.fma_v1(order=expert)"

MOECTS__ED_DESCRIPTOR(moects_cpu_mutant_ep_dispatch_combine_count_plus_one,
                      "cpu.mutant.ep_dispatch_combine.count_plus_one", REC, 0, MOECTS__ED_BUG_COUNT_PLUS_ONE,
                      "every non-zero send count one more than the rows for that rank (<= for <): one more row goes");
MOECTS__ED_DESCRIPTOR(moects_cpu_mutant_ep_dispatch_combine_drop_last_chunk,
                      "cpu.mutant.ep_dispatch_combine.drop_last_chunk", REC, 0, MOECTS__ED_BUG_DROP_LAST_CHUNK,
                      "rows sent in chunks of 8, the loop stops before a last partial chunk");
MOECTS__ED_DESCRIPTOR(moects_cpu_mutant_ep_dispatch_combine_weights_on_sender,
                      "cpu.mutant.ep_dispatch_combine.weights_on_sender", REC, 0, MOECTS__ED_BUG_WEIGHTS_ON_SENDER,
                      "the expert's rank multiplies by the weight and rounds to BF16; the token's rank only adds");
MOECTS__ED_DESCRIPTOR(moects_cpu_mutant_ep_dispatch_combine_weights_twice,
                      "cpu.mutant.ep_dispatch_combine.weights_twice", REC, 0, MOECTS__ED_BUG_WEIGHTS_TWICE,
                      "the weight applied on the expert's rank and again on the token's");
