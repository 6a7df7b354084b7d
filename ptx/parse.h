/* The PTX parser: text -> the same IR the builder makes (ptx/ir.h).
 *
 * It reads what our printer writes (so print(parse(text)) == text, byte for
 * byte) and the hand-written / nvcc-style subset around it: one .version,
 * .target and .address_size 64 header; module-scope .extern .shared and
 * .shared arrays; .entry kernels with .param lists, performance directives,
 * .reg banks (%r<N> families and plain names), function-scope .shared,
 * labels, guards and instructions. Every instruction is validated by
 * ptx_check_ins(), so the ISA table (ptx/isa.def) decides what is legal.
 *
 * Also: .pragma "nounroll"; (a pseudo-instruction), the cluster directives
 * .explicitcluster / .reqnctapercluster / .maxclusterrank, shapes such as
 * .m64n128k16, elect.sync's d|p destination, tensor operands
 * [tmap, {c0, c1}] and vectors of up to 128 registers (wgmma accumulators).
 *
 * Not supported (a clear error, never a guess): .func/call, .global/.const
 * variables, .local, nested { } scopes, other pragmas, .loc/.file, vector
 * registers, setp/shfl with a second "|p" destination, immediate addresses.
 *
 * The text need not be NUL-terminated and is never read past len. Errors
 * read "file:line:col: message" (line and col 1-based, col in bytes). */
#ifndef PTX_PARSE_H
#define PTX_PARSE_H

#include "ptx/ir.h"

/* Limits that keep hostile input from asking for unbounded work. */
enum {
    PTX_PARSE_MAX_REGS = 1 << 20, /* registers in one %r<N> family (index field) */
    PTX_PARSE_MAX_BANKS = 4000,   /* .reg declarations per entry (bank field) */
    PTX_PARSE_MAX_VEC = 128,      /* elements of a {a, b, ...} operand (wgmma m64n256 f32 D) */
    PTX_PARSE_MAX_NAME = 48,      /* register name length (printer buffer) */
};

/* Parses one module. filename names the text in messages (NULL: "<input>").
 * max_ptx is the highest .version the toolchain accepts (0: no ceiling); a
 * higher .version, or an instruction above it, is an error. On success *out
 * is the module (free with ptx_module_free) and m->version is the file's
 * .version; on failure *out is NULL and e holds the first error. */
int ptx_parse(const char *text, size_t len, const char *filename, int max_ptx,
              ptx_module **out, pt_err *e);

#endif
