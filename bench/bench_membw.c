/* bench_membw: the host's memory read bandwidth (a STREAM-like sum over a buffer
 * much larger than the caches), with 1..N threads, to place the CPU backend's
 * decode speed against its memory-bound limit.
 *
 *   bench_membw [--mib 1024] [--threads 2] [--reps 10] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct job {
    const float *p;
    size_t n;
    int reps;
    double sum;
};

static void *reader(void *arg)
{
    struct job *j = arg;
    double total = 0;
    for (int r = 0; r < j->reps; r++) {
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
        for (size_t i = 0; i + 8 <= j->n; i += 8) {
            s0 += j->p[i];
            s1 += j->p[i + 1];
            s2 += j->p[i + 2];
            s3 += j->p[i + 3];
            s4 += j->p[i + 4];
            s5 += j->p[i + 5];
            s6 += j->p[i + 6];
            s7 += j->p[i + 7];
        }
        total += s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
    }
    j->sum = total;
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    size_t mib = 1024;
    int max_threads = 2, reps = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib")) mib = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) max_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    size_t n = mib * 1024 * 1024 / sizeof(float);
    float *buf = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)(i & 1023) * 1e-3f;
    printf("| threads | read GB/s |\n|---|---|\n");
    for (int t = 1; t <= max_threads; t++) {
        pthread_t th[64];
        struct job jobs[64];
        double t0 = now();
        for (int k = 0; k < t; k++) {
            jobs[k] = (struct job){buf + n / t * k, n / t, reps, 0};
            pthread_create(&th[k], NULL, reader, &jobs[k]);
        }
        double chk = 0;
        for (int k = 0; k < t; k++) {
            pthread_join(th[k], NULL);
            chk += jobs[k].sum;
        }
        double dt = now() - t0;
        printf("| %d | %.1f |\n", t, (double)n * sizeof(float) * reps / dt / 1e9);
        if (chk == 42.0)
            printf("(checksum)\n");
    }
    free(buf);
    return 0;
}
