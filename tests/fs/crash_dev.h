/* A test disk for crash and fault tests: an image in memory behind the
 * public gmtf_image_ops, which records every operation the library issues
 * (write with its data, device flush, truncate, punch), rebuilds the states
 * a crash can leave, and injects faults. It knows nothing of the image
 * layout: it sees only the ops.
 *
 * Crash model: everything before a device flush is durable; of the writes
 * issued since, any subset may have reached the disk, each possibly torn
 * at 512-byte sectors (a prefix of its sectors, or any subset of them, in
 * any order). Truncates and punches since the flush may or may not have
 * happened. A power cut (cdev_power_cut) is a barrier: what was issued
 * before it is decided (the disk keeps all of it), what the library issues
 * after it is dropped until cdev_power_on. */
#ifndef CRASH_DEV_H
#define CRASH_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "gmtf_fs.h"

#define CDEV_SECTOR 512u

/* Op kinds; a reserve that grows the image is logged as a CD_TRUNC. */
enum { CD_WRITE, CD_FLUSH, CD_TRUNC, CD_PUNCH, CD_READ, CD_RESERVE, CD_NKIND };

typedef struct cd_op {
    uint8_t kind;    /* CD_WRITE, CD_FLUSH, CD_TRUNC, CD_PUNCH */
    uint8_t barrier; /* not the library's: CD_FLUSH made by a power cut (1) or around
                        cdev_inject (2), CD_WRITE by cdev_inject (1) */
    uint64_t off;    /* CD_TRUNC: the new length */
    uint64_t len;
    uint8_t *data; /* CD_WRITE: len bytes */
} cd_op;

/* Fault modes: the chosen op fails once, or fails with every op of its
 * kind until cdev_fault_clear; a short write stores the first half of the
 * write (rounded down to a sector) before failing. */
enum { CD_FAULT_ONCE, CD_FAULT_STICKY, CD_FAULT_SHORT };

typedef struct cdev {
    uint8_t *p; /* current bytes */
    size_t len, cap;
    cd_op *log;
    size_t n, logcap;
    int recording;
    int dead;                 /* power cut: ops succeed but change nothing */
    int no_write;             /* a write, truncate or punch is an error (read-only mounts) */
    size_t writes_seen;       /* writes, truncates, punches attempted while no_write */
    uint64_t count[CD_NKIND]; /* ops issued, by kind (faults count from here) */
    /* fault injection */
    int fault_kind;      /* -1: none armed */
    uint64_t fault_at;   /* fails op number fault_at of fault_kind (count[] value) */
    int fault_err;       /* -EIO, -ENOSPC */
    int fault_mode;      /* CD_FAULT_* */
    int fault_active;    /* sticky fault in force */
    uint64_t fault_hits; /* ops failed */
    int fault_paused;    /* the test's own reads: not counted, never failed */
} cdev;

cdev *cdev_new(const uint8_t *data, size_t len);
void cdev_free(cdev *d);
/* A gmtf_image on d (its close does not free d: the disk outlives mounts). */
gmtf_image *cdev_attach(cdev *d);
/* A copy of the current bytes and nothing else (no log, no faults). */
cdev *cdev_clone(const cdev *d);
void cdev_clear_log(cdev *d);
/* Crash: the library's later ops are dropped; a barrier goes into the log. */
void cdev_power_cut(cdev *d);
void cdev_power_on(cdev *d);

/* Writes bytes into the image as an outside agent (damage, for a repair
 * test): logged as a write and a barrier, so crash states keep it; no
 * crash state is made inside it. */
void cdev_inject(cdev *d, uint64_t off, const void *data, size_t len);

/* Arms a fault: op number `at` (0-based, counted from now) of `kind`. */
void cdev_fault_arm(cdev *d, int kind, uint64_t at, int err, int mode);
void cdev_fault_clear(cdev *d);
/* While paused, ops are neither counted nor failed (a test reading back
 * what it checks). Returns the previous state. */
int cdev_fault_pause(cdev *d, int paused);

/* ---- crash states -------------------------------------------------------- */

/* Called for each distinct state: img/len are the bytes a crash leaves;
 * crash_pos counts the ops issued before the crash (an acknowledgement
 * recorded when the log held p ops applies when p <= crash_pos); desc says
 * how the state was made (for failure reports). Returns 0 if the state
 * passed. */
typedef int (*cd_check_fn)(void *arg, const uint8_t *img, size_t len, size_t crash_pos,
                           const char *desc);

typedef struct cd_explore_opts {
    size_t target;  /* distinct states to check (all the log has, if fewer) */
    uint64_t seed;  /* of the choices (subsets, tears) */
    size_t from_op; /* windows that end before this op are skipped (0: all) */
    long only;      /* >= 0: check only the state with this number (reproduce) */
    int verbose;
} cd_explore_opts;

typedef struct cd_explore_stats {
    size_t windows;  /* flush-delimited windows in the log */
    size_t made;     /* states built (duplicates included) */
    size_t distinct; /* states checked */
    size_t failed;
    size_t torn; /* distinct states with a torn write */
} cd_explore_stats;

/* Enumerates crash states of the log recorded on d, starting from base
 * (the bytes when recording began): in every window between two flushes,
 * the state with nothing of the window, then random subsets with tears,
 * deduplicated by a hash of the bytes, spread over the windows. */
void cd_explore(const cdev *d, const uint8_t *base, size_t base_len, const cd_explore_opts *o,
                cd_check_fn fn, void *arg, cd_explore_stats *st);

/* The bytes after applying ops [0, k) of the log whole to base. */
uint8_t *cd_state_prefix(const cdev *d, const uint8_t *base, size_t base_len, size_t k,
                         size_t *len);

/* Prints ops [from, to) of the log (# comment lines, for failure analysis). */
void cd_print_log(const cdev *d, size_t from, size_t to);

uint64_t cd_hash(const uint8_t *p, size_t n);

/* Environment knob as a count: getenv(name) or def. */
size_t cd_env_count(const char *name, size_t def);

#endif
