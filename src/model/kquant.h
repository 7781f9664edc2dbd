/* Shared facts of the GGUF K formats (their layouts: src/model/tensor.c). */
#ifndef OKV_MODEL_KQUANT_H
#define OKV_MODEL_KQUANT_H

#include <stdint.h>

/* The 6-bit scale and min of sub-block j (of 8) of a Q4_K / Q5_K super-block, packed in 12
 * bytes: bytes 0-3 hold the scales of 0-3 in their low 6 bits, bytes 4-7 the mins of 0-3;
 * sub-blocks 4-7 take their low 4 bits from the nibbles of bytes 8-11 and their top 2 bits
 * from the top bits of bytes 0-3 (scales) and 4-7 (mins). */
static inline void okv_kq_scale_min(const uint8_t *s, int j, int *sc, int *mn)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

#endif
