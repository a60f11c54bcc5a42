/* The CPU versions of the built-in kernels, used by the sim backend through the kernel
 * table (kernel_desc.cpu). Internal to kernels/: callers go through kernels.h. */
#ifndef SSEQ_KERNELS_CPU_H
#define SSEQ_KERNELS_CPU_H

#include <stdint.h>

#include "kernels.h"

void kernel_cpu_fill(const struct karg *args, uint64_t elements);
void kernel_cpu_iota(const struct karg *args, uint64_t elements);
void kernel_cpu_add(const struct karg *args, uint64_t elements);
void kernel_cpu_axpy(const struct karg *args, uint64_t elements);
void kernel_cpu_scale(const struct karg *args, uint64_t elements);
void kernel_cpu_reduce_sum(const struct karg *args, uint64_t elements);
void kernel_cpu_spin(const struct karg *args, uint64_t elements);
void kernel_cpu_conv2d(const struct karg *args, uint64_t elements);
void kernel_cpu_transpose4(const struct karg *args, uint64_t elements);

#endif
