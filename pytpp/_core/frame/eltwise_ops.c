/* Op names of the element-wise families, from the op lists (eltwise_ops.h): what the Python
 * layer reads at import to map names to codes. */
#include "pytpp/eltwise.h"

#define NAME_ENTRY(E, name, ...) [PYTPP_EW_##E] = #name,
static const char *const unary_names[PYTPP_EW_N_UNARY] = {PYTPP_EW_UNARY_OPS(NAME_ENTRY)};
static const char *const binary_names[PYTPP_EW_N_BINARY] = {PYTPP_EW_BINARY_OPS(NAME_ENTRY)};
static const char *const ternary_names[PYTPP_EW_N_TERNARY] = {PYTPP_EW_TERNARY_OPS(NAME_ENTRY)};
static const char *const cmp_names[PYTPP_EW_N_CMP] = {PYTPP_EW_CMP_OPS(NAME_ENTRY)};
static const char *const reduce_names[PYTPP_EW_N_RED] = {PYTPP_EW_REDUCE_OPS(NAME_ENTRY)};

#define APPROX_ENTRY(E, name, expr, EXACT, ...) [PYTPP_EW_##E] = PYTPP_EW_##EXACT + 1,
/* exact op + 1 (0: not an approximation) */
static const int approx_of[PYTPP_EW_N_UNARY] = {PYTPP_EW_UNARY_APPROX(APPROX_ENTRY)};

const char *pytpp_ew_op_name(int family, int op)
{
    const char *const *names = NULL;
    int count = 0;
    switch (family) {
    case PYTPP_EW_FAM_UNARY: names = unary_names, count = PYTPP_EW_N_UNARY; break;
    case PYTPP_EW_FAM_BINARY: names = binary_names, count = PYTPP_EW_N_BINARY; break;
    case PYTPP_EW_FAM_TERNARY: names = ternary_names, count = PYTPP_EW_N_TERNARY; break;
    case PYTPP_EW_FAM_CMP: names = cmp_names, count = PYTPP_EW_N_CMP; break;
    case PYTPP_EW_FAM_REDUCE: names = reduce_names, count = PYTPP_EW_N_RED; break;
    default: return NULL;
    }
    return op >= 0 && op < count ? names[op] : NULL;
}

int pytpp_ew_approx_of(int op)
{
    return op >= 0 && op < PYTPP_EW_N_UNARY ? approx_of[op] - 1 : -1;
}
