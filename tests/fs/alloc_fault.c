/* Allocation faults (alloc_fault.h). */
#include "alloc_fault.h"

#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);

static long countdown = -1;
static int fired;

static int should_fail(void)
{
    long c = __atomic_load_n(&countdown, __ATOMIC_RELAXED);
    if (c < 0)
        return 0;
    if (__atomic_sub_fetch(&countdown, 1, __ATOMIC_RELAXED) == -1) {
        __atomic_store_n(&fired, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return 0;
}

void alloc_fault_arm(long n)
{
    __atomic_store_n(&fired, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&countdown, n, __ATOMIC_RELAXED);
}

void alloc_fault_disarm(void)
{
    __atomic_store_n(&countdown, -1, __ATOMIC_RELAXED);
}

int alloc_fault_fired(void)
{
    return __atomic_load_n(&fired, __ATOMIC_RELAXED);
}

void *__wrap_malloc(size_t n)
{
    return should_fail() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
    return should_fail() ? NULL : __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : __real_realloc(p, n);
}
