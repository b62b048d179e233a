#include "fs_internal.h"
int gmtf_fs_check(gmtf_image *img, const gmtf_fs_check_options *opt, gmtf_fs_check_report *rep){(void)img;(void)opt;(void)rep;return -ENOSYS;}
