/* gmtf -u MOUNTPOINT: unmounts a gmtf filesystem and returns only once
 * the daemon has stored everything and let go of the image.
 *
 * fusermount3 -u (or umount) returns as soon as the kernel has detached
 * the mount; the daemon then flushes its write-back cache, writes its last
 * checkpoint and closes the image, which may take seconds. The daemon
 * holds the image's lock (an OFD lock, fs/image_io.c: a write lock
 * read-write, a read lock read-only) until that work is done, so waiting
 * until no lock is held waits for exactly that (and for any other program
 * that has the image open through the library: fsck, gmtf-extract...).
 * This file finds the image from /proc/self/mountinfo, opens it,
 * unmounts, then waits. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "gmtf_fuse.h"

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = 0;
}

/* The source and type of the last mount at mnt (the visible one), from
 * /proc/self/mountinfo. 0, -ENOENT (not a mount point) or -errno. */
static int find_mount(const char *mnt, char *source, size_t scap, char *type, size_t tcap)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    int rc = -ENOENT;
    while (getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER */
        char *save = NULL, *field[5] = {0};
        char *tok = strtok_r(line, " \n", &save);
        for (int i = 0; tok && i < 5; i++, tok = i < 5 ? strtok_r(NULL, " \n", &save) : tok)
            field[i] = tok;
        if (!field[4])
            continue;
        unescape(field[4]);
        if (strcmp(field[4], mnt))
            continue;
        while ((tok = strtok_r(NULL, " \n", &save)) && strcmp(tok, "-"))
            ;
        char *t = tok ? strtok_r(NULL, " \n", &save) : NULL;
        char *src = t ? strtok_r(NULL, " \n", &save) : NULL;
        if (!src)
            continue;
        unescape(t);
        unescape(src);
        snprintf(type, tcap, "%s", t);
        snprintf(source, scap, "%s", src);
        rc = 0; /* keep going: a later line mounted over it wins */
    }
    free(line);
    fclose(f);
    return rc;
}

/* umount2 when allowed (root), else fusermount3 -u. 0 or -1 (reported). */
static int detach(const char *mnt)
{
    if (!umount2(mnt, UMOUNT_NOFOLLOW))
        return 0;
    if (errno != EPERM) {
        fprintf(stderr, "gmtf: %s: unmount: %s\n", mnt, strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gmtf: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        execlp("fusermount3", "fusermount3", "-u", "--", mnt, (char *)NULL);
        fprintf(stderr, "gmtf: fusermount3: %s\n", strerror(errno));
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int gmtf_unmount_main(const char *mountpoint, int quiet)
{
    char mnt[PATH_MAX], source[PATH_MAX], type[64];
    if (!realpath(mountpoint, mnt)) {
        fprintf(stderr, "gmtf: %s: %s\n", mountpoint, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    int rc = find_mount(mnt, source, sizeof source, type, sizeof type);
    if (rc) {
        fprintf(stderr, "gmtf: %s: %s\n", mnt, rc == -ENOENT ? "not a mount point" : strerror(-rc));
        return CLI_EXIT_FAIL;
    }
    if (strncmp(type, "fuse.", 5) && strcmp(type, "fuse")) {
        fprintf(stderr, "gmtf: %s: a %s filesystem, not gmtf\n", mnt, type);
        return CLI_EXIT_FAIL;
    }
    /* open before the unmount: the path then names the image we wait for */
    int fd = open(source, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        fprintf(stderr, "gmtf: %s: the image %s: %s\n", mnt, source, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (detach(mnt)) {
        close(fd);
        return CLI_EXIT_FAIL;
    }
    /* wait until nobody holds a lock on the image: a read-write daemon's
     * write lock goes once everything is stored; F_OFD_GETLK needs no
     * write access to the image */
    double start = cli_now(), said = start;
    for (;;) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, F_OFD_GETLK, &fl)) {
            fprintf(stderr, "gmtf: %s: the image's lock: %s\n", source, strerror(errno));
            close(fd);
            return CLI_EXIT_FAIL;
        }
        if (fl.l_type == F_UNLCK)
            break;
        if (!quiet && cli_now() - said >= 5) {
            fprintf(stderr, "gmtf: %s: still storing (%.0f s)\n", source, cli_now() - start);
            said = cli_now();
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    close(fd);
    return CLI_EXIT_OK;
}
