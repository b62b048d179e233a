/* The GPU BWT's no-device path: with no CUDA device (CI, laptops) every
 * gpu_bwt.h entry point answers -ENODEV cleanly and creates nothing; calls
 * without a context are refused on any machine; the layout helpers need no
 * device. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpu.h"
#include "gpu_bwt.h"

static void test_no_context(void **state)
{
    (void)state;
    uint8_t src[16] = "banana", dst[16];
    uint32_t idx[16];
    uint64_t off[2] = {0, 6};
    void *p;
    gmtf_gpu_bwt_profile pr;
    assert_int_equal(gmtf_gpu_bwt_batch(NULL, src, off, 1, NULL, dst, idx), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_stage_upload(NULL, src, off, 1, NULL), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_stage_run(NULL, NULL), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_stage_download(NULL, dst, idx), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_stage_device(NULL, &p, &p), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_set_piece(NULL, 0), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_set_profile(NULL, 1), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_get_profile(NULL, &pr), -ENODEV);
    assert_int_equal(gmtf_gpu_bwt_ok(NULL), 0);
    assert_non_null(gmtf_gpu_bwt_error(NULL));
    gmtf_gpu_bwt_destroy(NULL);
    /* layout helpers */
    assert_int_equal(gmtf_gpu_bwt_default_step(6), 6);
    assert_int_equal(gmtf_gpu_bwt_default_step(16u << 14), 1u << 14);
    assert_int_equal(gmtf_gpu_bwt_default_step(20u << 14), 20480); /* K = 16 */
    assert_int_equal(gmtf_gpu_bwt_index_total(off, 1, NULL), 1);
    assert_string_equal(gmtf_gpu_bwt_phase_name(0), "keys");
    assert_null(gmtf_gpu_bwt_phase_name(GMTF_GPU_BWT_PH_COUNT));
}

static void test_create(void **state)
{
    (void)state;
    gmtf_gpu_bwt_ctx *ctx = (gmtf_gpu_bwt_ctx *)&ctx; /* must be overwritten */
    int rc = gmtf_gpu_bwt_create(&ctx);
    if (gmtf_gpu_available()) {
        assert_int_equal(rc, 0);
        assert_non_null(ctx);
        assert_true(gmtf_gpu_bwt_ok(ctx));
        gmtf_gpu_bwt_destroy(ctx);
        return;
    }
    assert_int_equal(rc, -ENODEV);
    assert_null(ctx);
    assert_int_equal(gmtf_gpu_bwt_create(NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_context),
        cmocka_unit_test(test_create),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
