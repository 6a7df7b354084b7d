/* Private to db/: the columns of a winner row (db__winner_select), one
 * X-macro row each: (id, SQL expression). Column 0 is m.id; the enum gives
 * each id its index after it. The JSON export writes every column, so
 * import can rebuild the same rows. */
#ifndef PT_DB_WCOLS_H
#define PT_DB_WCOLS_H

#define DB_WCOLS(X)                                                                      \
    X(FP_KEY, "f.key") X(FP_GPU, "f.gpu") X(FP_CC, "f.cc") X(FP_SMS, "f.sm_count")         \
    X(FP_DRIVER, "f.driver") X(FP_COMPILER, "f.compiler") X(FP_PTX, "f.ptx_version")       \
    X(FP_GENERATOR, "f.generator") X(FP_PROTOCOL, "f.protocol")                            \
    X(P_KEY, "p.key") X(P_NAME, "p.name") X(P_OP, "p.op") X(P_CLASS, "p.class")             \
    X(P_DIMS, "p.dims") X(P_FLOPS, "p.flops") X(P_BYTES, "p.bytes")                        \
    X(K_HASH, "k.hash") X(K_OP, "k.op") X(K_CONFIG, "k.config") X(K_ENTRY, "k.entry")      \
    X(K_PTX, "k.ptx")                                                                      \
    X(C_CUBIN, "c.cubin") X(C_COMPILER, "c.compiler") X(C_RESOURCES, "c.resources")        \
    X(R_UUID, "r.uuid") X(R_TOOL, "r.tool_version") X(R_GIT, "r.git_rev")                  \
    X(R_STRATEGY, "r.strategy") X(R_BUDGET, "r.budget") X(R_SEED, "r.seed")                \
    X(R_BACKEND, "r.backend") X(R_ARCH, "r.arch") X(R_ARGS, "r.args_key")                  \
    X(R_HOST, "r.host") X(R_PID, "r.pid") X(R_STARTED, "r.started") X(R_ENDED, "r.ended")  \
    X(R_STATUS, "r.status")                                                                \
    X(M_CONFIG, "m.config") X(M_RUNG, "m.rung") X(M_FINAL, "m.final")                      \
    X(M_STATUS, "m.status") X(M_ERROR, "m.error") X(M_SOURCE, "m.source")                  \
    X(M_VERIFIED, "m.verified") X(M_TMIN, "m.t_min") X(M_TMEDIAN, "m.t_median")            \
    X(M_TMAX, "m.t_max") X(M_SPREAD, "m.spread") X(M_REPS, "m.reps")                       \
    X(M_TFLOPS, "m.tflops") X(M_GBPS, "m.gbps") X(M_LAUNCH, "m.launch")                    \
    X(M_CREATED, "m.created")

enum db_wcol {
    DB_WC_M_ID,
#define X(id, expr) DB_WC_##id,
    DB_WCOLS(X)
#undef X
    DB_WC_N
};

#endif
