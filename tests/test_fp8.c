/* label: unit */
/* FP8 E4M3 conversions (src/util/half.c) against the ml_dtypes package's float8_e4m3fn
 * (tests/data/e4m3_ref.bin, made by tests/py/make_e4m3_ref.py): every bfloat16 bit pattern
 * encodes to ml_dtypes' byte (round to nearest even, subnormals, signed zeros), except where
 * OasisKV saturates on purpose (finite values past 464 and infinities, which ml_dtypes makes
 * NaN, become +-448; a NaN keeps its sign), and every code decodes to ml_dtypes' value. Then
 * okv_f32_to_e4m3 goes through bfloat16, and decoding then encoding returns every code. */
#include "oasiskv/common.h"
#include "testutil.h"

#include <math.h>

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int main(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/e4m3_ref.bin", tu_src_dir());
    size_t len = 0;
    uint8_t *ref = (uint8_t *)tu_read_file(path, &len);
    CHECK(ref && len == 65536 + 256 * 4, "%s: missing or wrong size (%zu bytes)", path, len);
    if (!ref || len != 65536 + 256 * 4)
        return tu_finish("test_fp8");
    int exact = 0, saturated = 0, nan = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        const uint8_t got = okv_bf16_to_e4m3((uint16_t)b), want = ref[b];
        const float x = u2f(b << 16);
        if (isnan(x)) {
            CHECK((got & 0x7f) == 0x7f && (got & 0x80) == ((b >> 8) & 0x80), "bf16 %04x (NaN) -> %02x", b, got);
            nan++;
        } else if (fabsf(x) > 464.0f) {
            CHECK((want & 0x7f) == 0x7f, "bf16 %04x: the reference should overflow to NaN, gives %02x", b, want);
            CHECK(got == (x < 0 ? 0xfe : 0x7e), "bf16 %04x (%g) -> %02x, want saturation to %s448", b, x, got, x < 0 ? "-" : "");
            saturated++;
        } else {
            CHECK(got == want, "bf16 %04x (%g) -> %02x, ml_dtypes %02x", b, x, got, want);
            exact++;
        }
    }
    for (int c = 0; c < 256; c++) {
        float want;
        memcpy(&want, ref + 65536 + 4 * c, 4);
        const float got = okv_e4m3_to_f32((uint8_t)c);
        if (isnan(want))
            CHECK(isnan(got), "e4m3 %02x -> %g, want NaN", c, got);
        else
            CHECK(got == want && signbit(got) == signbit(want), "e4m3 %02x -> %g, ml_dtypes %g", c, got, want);
        if (!isnan(want))
            CHECK(okv_f32_to_e4m3(got) == (uint8_t)c, "e4m3 %02x does not round-trip (%02x)", c, okv_f32_to_e4m3(got));
    }
    /* a float rounds to bfloat16 first: just above a tie of e4m3, but the bf16 rounding lands on it */
    CHECK(okv_f32_to_e4m3(1.0625f) == okv_bf16_to_e4m3(okv_f32_to_bf16(1.0625f)), "f32 goes through bf16");
    CHECK(okv_f32_to_e4m3(1.06250012f) == 0x38, "1.0625 + 1 ulp: bf16 gives the tie 1.0625, even -> 1.0 (0x38), got %02x",
          okv_f32_to_e4m3(1.06250012f));
    CHECK(okv_f32_to_e4m3(-INFINITY) == 0xfe && okv_f32_to_e4m3(1e30f) == 0x7e, "saturation of float inputs");
    printf("test_fp8: %d bf16 patterns equal to ml_dtypes, %d saturated, %d NaN\n", exact, saturated, nan);
    free(ref);
    return tu_finish("test_fp8");
}
