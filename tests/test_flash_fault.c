/*
 * test_flash_fault.c -- the seeded fault of test_flash's bf16 tolerance
 * (issue 30): the flash tiles (src/kernels/attn_tiles.c) built into this
 * test with REMAT_ATTN_SEEDED_FAULT, one rounding point too many (each
 * row's log-sum-exp to bf16), override the library's copy at link time; test_flash's
 * bf16 bounds must then fail, and this test passes when they do.  The
 * library is never built with the fault.
 */
#define REMAT_ATTN_SEEDED_FAULT 1
#include "../src/kernels/attn_tiles.c"
#define TEST_FLASH_SEEDED_FAULT 1
#include "test_flash.c"
