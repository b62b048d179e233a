/* The no-device path: with no CUDA device (CI, laptops) every gpu/ entry
 * point answers -ENODEV cleanly, and the codec's gpu backends say they are
 * unavailable, so "auto" and batch calls fall back to the CPU. On a machine
 * with a GPU it checks that calls without a context are refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gmtf_config.h"
#include "gpu.h"
#include "mtf.h"
#include "mtf_bench.h"

static void test_entry_points(void **state)
{
    (void)state;
    uint8_t src[64] = {1, 2, 3}, dst[64];
    uint64_t off[2] = {0, sizeof src};
    uint32_t keys[4] = {4, 3, 2, 1}, k;
    /* no context: refused whatever the machine */
    assert_int_equal(gmtf_gpu_mtf_encode_batch(NULL, -1, src, off, 1, dst), -ENODEV);
    assert_int_equal(gmtf_gpu_mtf_decode_batch(NULL, -1, src, off, 1, dst), -ENODEV);
    assert_int_equal(gmtf_gpu_stage_upload(NULL, src, off, 1), -ENODEV);
    assert_int_equal(gmtf_gpu_stage_run(NULL, -1, 0, NULL), -ENODEV);
    assert_int_equal(gmtf_gpu_kselect(NULL, GMTF_GPU_KEY_U32, keys, 4, 1, &k), -ENODEV);
    assert_int_equal(gmtf_gpu_ctx_ok(NULL), 0);
    /* the variant table needs no device */
    assert_true(gmtf_gpu_variant_count() >= 10);
    assert_int_equal(gmtf_gpu_variant_find("scalar") >= 0, 1);
    assert_string_equal(gmtf_gpu_variant_name((size_t)gmtf_gpu_variant_find("4by8")), "4by8");
    assert_null(gmtf_gpu_variant_name(1000));
    if (gmtf_gpu_available())
        return;
    gmtf_gpu_ctx *ctx = (gmtf_gpu_ctx *)&k; /* must be overwritten with NULL */
    assert_int_equal(gmtf_gpu_ctx_create(&ctx), -ENODEV);
    assert_null(ctx);
    char name[64];
    assert_int_equal(gmtf_gpu_device_info(name, sizeof name, NULL), -ENODEV);
    assert_null(gmtf_gpu_host_alloc(4096));
    gmtf_gpu_ctx_destroy(NULL);
}

/* The codec falls back: gpu entries (when built with CUDA) report
 * unavailable, lookup by name fails, auto picks a CPU backend, and the
 * per-block hooks still produce the reference output. */
static void test_codec_fallback(void **state)
{
    (void)state;
    const gmtf_mtf_backend *const *list;
    size_t n = gmtf_mtf_backends(&list);
    size_t gpu_entries = 0;
    uint8_t src[5000], ref[5000], out[5000];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)((i * 7) % 13 + (i % 100 == 0) * 200);
    gmtf_mtf_encode_scalar(src, ref, sizeof src);
    for (size_t i = 0; i < n; i++) {
        if (strncmp(list[i]->name, "gpu", 3) != 0)
            continue;
        gpu_entries++;
        assert_int_equal(list[i]->available(list[i]), gmtf_gpu_available());
        /* an instance holds no CUDA context until its first batch */
        gmtf_mtf m;
        assert_int_equal(gmtf_mtf_init(&m, list[i]), 0);
        /* per-block call works either way (GPU or scalar fallback) */
        memset(out, 0, sizeof out);
        gmtf_mtf_encode(&m, src, out, sizeof src);
        assert_memory_equal(out, ref, sizeof src);
        gmtf_mtf_decode(&m, ref, out, sizeof src);
        assert_memory_equal(out, src, sizeof src);
        if (!gmtf_gpu_available()) {
            uint64_t off[2] = {0, sizeof src};
            assert_true(gmtf_mtf_batch_encode(&m, src, off, 1, out) < 0);
            double ms;
            assert_true(gmtf_mtf_bench_kernel(&m, src, off, 1, out, 0, &ms) < 0);
            assert_null(gmtf_mtf_backend_find(list[i]->name));
        }
        gmtf_mtf_free(&m);
    }
#if GMTF_HAVE_CUDA
    assert_true(gpu_entries >= 2);
#else
    assert_int_equal(gpu_entries, 0);
#endif
    const gmtf_mtf_backend *a = gmtf_mtf_backend_find("auto");
    assert_non_null(a);
    assert_true(strncmp(a->name, "gpu", 3) != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entry_points),
        cmocka_unit_test(test_codec_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
