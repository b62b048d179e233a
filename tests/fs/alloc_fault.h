/* Allocation faults for tests: a test binary linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/fs/meson.build)
 * routes every allocation of the library through these wrappers, which can
 * make one of them return NULL. */
#ifndef ALLOC_FAULT_H
#define ALLOC_FAULT_H

/* The n-th allocation from now (0: the next) fails, once. */
void alloc_fault_arm(long n);
void alloc_fault_disarm(void);
/* 1 when the armed allocation was reached (and failed). */
int alloc_fault_fired(void);

#endif
