/* fsck.gmtf: checks (and with -y or -p repairs) a gmtf image. Exit status
 * as fsck(8), the sum of: 1 errors corrected (the image was written),
 * 4 errors left uncorrected, 8 operational error (also: a repair that
 * cannot be made safely, nothing written), 16 usage error, 32 cancelled
 * by the user (SIGINT, SIGTERM). 2 (reboot) never: a mounted image is
 * locked against fsck. 0: no errors, nothing written. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gmtf_codec.h"
#include "gmtf_fs.h"

/* fsck(8)'s exit statuses (cli.h). */
enum {
    FSCK_OK = CLI_EXIT_OK,
    FSCK_FIXED = CLI_EXIT_FAIL,
    FSCK_UNCORRECTED = CLI_EXIT_UNCORRECTED,
    FSCK_ERROR = CLI_EXIT_OPERATIONAL,
    FSCK_USAGE = CLI_EXIT_USAGE,
    FSCK_CANCELLED = 32,
};

/* The check can stop anywhere: read-only it wrote nothing, and a repair's
 * checkpoint is crash-safe (its superblock is written last), so the image
 * is as before or repaired, never between. */
static void on_cancel(int sig)
{
    (void)sig;
    static const char msg[] = "\nfsck.gmtf: cancelled\n";
    if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {
        /* nothing more to do in a signal handler */
    }
    _exit(FSCK_CANCELLED);
}

typedef struct fsck_ctx {
    const char *prog, *path;
    cli_progress line;
} fsck_ctx;

static void log_line(void *arg, const char *msg)
{
    fsck_ctx *c = arg;
    cli_progress_printf(&c->line, "%s: %s: %s\n", c->prog, c->path, msg);
}

static void progress(void *arg, uint64_t done, uint64_t total)
{
    fsck_ctx *c = arg;
    if (!cli_progress_due(&c->line, done == total))
        return;
    cli_work w = {.what = "verifying frames",
                  .done = done,
                  .total = total,
                  .files = done,
                  .files_total = total,
                  .unit = "frames"};
    cli_progress_work(&c->line, &w, done == total);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "Usage: %s [-n|-y|-p] [-f] [--verify-data] [OPTIONS] IMAGE\n"
            "Check a gmtf filesystem image, and repair it with -y or -p.\n\n"
            "  -n               check only, open the image read-only (default)\n"
            "  -y, -p           repair what can be repaired\n"
            "  -f               check even if the image looks clean (always done)\n"
            "      --verify-data  decode every data frame and check its checksum\n"
            "  -j, --threads=N  decoding threads (default: all CPUs)\n"
            "      --mtf=NAME   MTF backend of the codec\n"
            "  -q, --quiet      print only problems\n"
            "  -h, --help       show this help and exit\n"
            "  -V, --version    show the version and exit\n"
            "Exit status (fsck(8), added up): 0 no errors, 1 errors corrected, 4 errors left\n"
            "uncorrected, 8 operational error, 16 usage error, 32 cancelled.\n",
            prog);
}

int main(int argc, char **argv)
{
    const char *prog = "fsck.gmtf";
    static const struct option longs[] = {{"verify-data", no_argument, 0, 'D'},
                                          {"threads", required_argument, 0, 'j'},
                                          {"mtf", required_argument, 0, 'm'},
                                          {"quiet", no_argument, 0, 'q'},
                                          {"help", no_argument, 0, 'h'},
                                          {"version", no_argument, 0, 'V'},
                                          {0, 0, 0, 0}};
    gmtf_fs_check_options o = {0};
    int mode_n = 0, mode_y = 0, quiet = 0, opt;
    while ((opt = getopt_long(argc, argv, "nypfaj:qhV", longs, NULL)) != -1) {
        switch (opt) {
        case 'n': mode_n = 1; break;
        case 'y':
        case 'p':
        case 'a': mode_y = 1; break;
        case 'f': break;
        case 'D': o.verify_data = 1; break;
        case 'j':
            if (cli_parse_threads(prog, optarg, &o.threads) < 0) {
                return FSCK_USAGE;
            }
            break;
        case 'm': o.mtf = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout, prog); return FSCK_OK;
        case 'V': cli_version(prog, NULL); return FSCK_OK;
        default: usage(stderr, prog); return FSCK_USAGE;
        }
    }
    if (mode_n && mode_y) {
        fprintf(stderr, "%s: -n and -y/-p exclude each other\n", prog);
        return FSCK_USAGE;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "%s: %s\n", prog,
                optind >= argc ? "no IMAGE given" : "more than one IMAGE given");
        usage(stderr, prog);
        return FSCK_USAGE;
    }
    fsck_ctx c = {.prog = prog, .path = argv[optind]};
    cli_progress_init(&c.line, prog, quiet, 1);
    struct sigaction sa = {.sa_handler = on_cancel};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    gmtf_image *img;
    int rc = gmtf_image_open_file(c.path, mode_y ? 0 : GMTF_IMAGE_RDONLY, &img);
    if (rc) {
        if (rc == -EBUSY)
            fprintf(stderr, "%s: %s is in use (mounted, or being changed): refusing to check it\n",
                    prog, c.path);
        else
            fprintf(stderr, "%s: %s: %s\n", prog, c.path, strerror(-rc));
        return FSCK_ERROR;
    }
    o.repair = mode_y;
    o.log = log_line;
    o.log_arg = &c;
    o.progress = progress;
    o.progress_arg = &c;
    gmtf_fs_check_report rep;
    rc = gmtf_fs_check(img, &o, &rep);
    gmtf_image_close(img);
    if (rc) {
        const char *why = rc == -EINVAL    ? "not a gmtf image (no superblock)"
                          : rc == -EUCLEAN ? "no usable superblock or metadata snapshot"
                          : rc < -1000     ? gmtf_strerror(rc)
                                           : strerror(-rc);
        fprintf(stderr, "%s: %s: %s\n", prog, c.path, why);
        /* no metadata to check: errors left; anything else kept fsck
         * from doing its work (a refused repair writes nothing) */
        return rc == -EUCLEAN ? FSCK_UNCORRECTED : FSCK_ERROR;
    }
    const gmtf_fs_info *i = &rep.info;
    if (!quiet) {
        char uuid[37];
        cli_uuid_string(i->uuid, uuid);
        printf("%s: %s: %s, generation %" PRIu64 ", label '%s', UUID %s\n", prog, c.path,
               rep.errors ? (rep.written && rep.fixed >= rep.errors ? "repaired" : "ERRORS")
                          : "clean",
               i->generation, i->label, uuid);
        printf("  %" PRIu64 " files, %" PRIu64 " directories, %" PRIu64 " symlinks, %" PRIu64
               " others\n"
               "  %" PRIu64 " bytes in files, %" PRIu64 " bytes stored in %" PRIu64
               " frames, ratio %.3f (bytes in files / bytes stored)\n"
               "  %" PRIu64 " bytes allocated of %" PRIu64 " in use, block size %u\n",
               i->files, i->dirs, i->symlinks, i->others, i->data_bytes, i->stored_bytes, i->frames,
               cli_ratio(i->data_bytes, i->stored_bytes), i->used_bytes, i->image_bytes,
               i->block_size);
        if (rep.errors)
            printf("  %u problems found, %u repaired\n", rep.errors, rep.fixed);
    }
    if (rep.unrepairable)
        return FSCK_ERROR;                           /* nothing was written: the log says why */
    int status = rep.written ? FSCK_FIXED : FSCK_OK; /* also a journal replayed into it */
    if (rep.errors > (rep.written ? rep.fixed : 0))
        status |= FSCK_UNCORRECTED;
    return status;
}
