/*
 * plan_and_train.c -- remat as a library: plan under a memory budget, train
 * with the plan, and check the prediction against the measurement.
 *
 * Uses only the public API (remat.h).  Build it against an installed remat:
 *
 *   make install PREFIX=$HOME/.local
 *   cc plan_and_train.c $(PKG_CONFIG_PATH=$HOME/.local/lib/pkgconfig pkg-config --cflags --libs remat)
 *   LD_LIBRARY_PATH=$HOME/.local/lib ./a.out
 *
 * Exits 0 when every call succeeded and the measured activation peak equals
 * the predicted one (remat promises them equal to the byte), 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <remat.h>

#define STEPS 5
#define MIB(x) ((double)(x) / (1 << 20))

/* Every remat call returns a status; on failure remat_errmsg() says why. */
#define TRY(call) do {                                                          \
        remat_status st_ = (call);                                              \
        if (st_ != REMAT_OK) {                                                  \
            fprintf(stderr, "plan_and_train: %s: %s: %s\n", #call,              \
                    remat_status_str(st_), remat_errmsg());                     \
            goto out;                                                           \
        }                                                                       \
    } while (0)

int main(void)
{
    int rc = 1;
    remat_model *model = NULL;
    remat_data *data = NULL;
    int *inputs = NULL, *targets = NULL;
    remat_plan_row none = {0}, plan = {0};   /* each owns its policy string: cleared at out */

    /* A small GPT-2 on the embedded arithmetic task (byte tokens). */
    remat_config cfg;
    remat_config_default(&cfg);
    cfg.n_layer = 4; cfg.n_embd = 64; cfg.n_head = 4;
    cfg.seq = cfg.max_seq = 32; cfg.batch = 8;
    cfg.vocab = remat_data_default_vocab(NULL);
    TRY(remat_config_check(&cfg));
    remat_set_threads(1);
    printf("remat %s: %d layers, dim %d, batch %d x seq %d\n", remat_version(), cfg.n_layer, cfg.n_embd,
           cfg.batch, cfg.seq);

    /* The budget: 60% of the activation memory that keeping everything
     * needs.  NULL profile: step times come from the FLOP model. */
    TRY(remat_plan_evaluate(&cfg, NULL, "none", 0, 1, &none));
    uint64_t budget = none.peak_bytes / 10 * 6;
    TRY(remat_plan_optimal(&cfg, NULL, budget, 1, &plan));
    printf("budget %.2f MiB of activations (keeping everything: %.2f MiB)\n", MIB(budget), MIB(none.peak_bytes));
    printf("plan %s\n  predicted peak %.2f MiB, step %.1f ms (+%.1f%% recomputation)\n", plan.policy,
           MIB(plan.peak_bytes), plan.step_ms_pred, plan.overhead_pct);

    /* A model that runs the plan, and the data to train it on. */
    TRY(remat_model_create(&cfg, 1234, &model));
    TRY(remat_model_set_policy(model, plan.policy));
    TRY(remat_data_open(NULL, cfg.vocab, &data));
    size_t n = (size_t)cfg.batch * (size_t)cfg.seq;
    inputs = malloc(n * sizeof *inputs);
    targets = malloc(n * sizeof *targets);
    if (!inputs || !targets) { fprintf(stderr, "plan_and_train: out of memory\n"); goto out; }

    for (int step = 1; step <= STEPS; step++) {
        float loss;
        TRY(remat_data_next(data, REMAT_SPLIT_TRAIN, cfg.batch, cfg.seq, inputs, targets));
        TRY(remat_model_step(model, inputs, targets, 1, &loss));
        printf("step %d/%d  loss %.4f\n", step, STEPS, loss);
    }

    /* The accounting allocator measured the peak; the simulator predicted it. */
    remat_stats stats;
    remat_model_stats(model, &stats);
    printf("activation peak: measured %llu bytes, predicted %llu bytes: %s\n",
           (unsigned long long)stats.act_peak_bytes, (unsigned long long)plan.peak_bytes,
           stats.act_peak_bytes == plan.peak_bytes ? "equal" : "DIFFERENT");
    if (stats.act_peak_bytes != plan.peak_bytes || stats.act_peak_bytes > budget) goto out;
    rc = 0;
out:
    remat_plan_row_clear(&none);
    remat_plan_row_clear(&plan);
    free(inputs);
    free(targets);
    remat_data_free(data);
    remat_model_free(model);
    return rc;
}
