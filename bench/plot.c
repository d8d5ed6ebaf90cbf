/* SPDX-License-Identifier: MIT */
/* plot.c - --plot FILE.svg: the latency distribution of the latency scenario (lock cycle next to
 * the raw cycle), the throughput-vs-concurrency curve (with the servers' limit measured beside
 * each row, when measured) and the cycles-per-second-vs-nodes curve of the scale scenario,
 * drawn by gnuplot. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench.h"

static void write_cdf(FILE *f, const samples *s)
{
    /* Samples are sorted (percentiles sorted them); thin to at most ~150 points, which draw
     * the curve as closely as a screen shows it and keep the SVG small (under 50 KB). */
    size_t step = s->n > 150 ? s->n / 150 : 1;
    for (size_t i = 0; i < s->n; i += step)
        fprintf(f, "%llu %.5f\n", (unsigned long long)s->v[i], (double)(i + 1) / (double)s->n);
    if (s->n > 0)
        fprintf(f, "%llu 1.0\n", (unsigned long long)s->v[s->n - 1]);
    fprintf(f, "e\n");
}

void bench_plot(const bench_config *cfg)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "redlock-bench: --plot needs gnuplot (apt-get install gnuplot-nox)\n");
        return;
    }
    FILE *g = popen("gnuplot", "w");
    if (g == NULL) {
        fprintf(stderr, "redlock-bench: cannot run gnuplot\n");
        return;
    }
    fprintf(g, "set terminal svg size 1650,450 dynamic background rgb 'white'\nset output '%s'\n",
            cfg->plot_path);
    fprintf(g, "set multiplot layout 1,3\n");
    fprintf(g, "set title 'latency: one cycle (acquire + release), one at a time'\n"
               "set xlabel 'microseconds'\nset ylabel 'fraction of cycles'\nset logscale x\n"
               "set key bottom right\nset grid\n");
    if (cfg->plot_cycle.n > 0 && cfg->plot_raw_cycle.n > 0) {
        fprintf(g, "plot '-' with lines lw 2 title 'libredlock', '-' with lines lw 2 dt 2 title "
                   "'raw fan-out'\n");
        write_cdf(g, &cfg->plot_cycle);
        write_cdf(g, &cfg->plot_raw_cycle);
    } else {
        fprintf(g, "set label 'latency scenario not run' at graph 0.3,0.5\n"
                   "plot [1:10][0:1] NaN notitle\n"); /* fixed ranges: no data to scale by */
        fprintf(g, "unset label\n");
    }
    fprintf(g, "unset logscale x\nset logscale x 2\nset title 'throughput'\n"
               "set xlabel 'cycles in flight'\nset ylabel 'cycles per second'\nset key top left\n");
    if (cfg->tp_points > 0) {
        /* The servers' limit is measured beside each row's slices (sc_speed.c): a curve too. */
        bool limit = true;
        for (unsigned i = 0; i < cfg->tp_points; i++)
            limit = limit && cfg->tp_limit[i] > 0;
        fprintf(g, "plot '-' with linespoints lw 2 title 'libredlock', '-' with linespoints lw 2 "
                   "dt 2 title 'raw fan-out'");
        if (limit)
            fprintf(g, ", '-' with linespoints lw 1 dt 3 lc rgb 'black' title 'servers'' limit'");
        fprintf(g, "\n");
        const double *curves[3] = {cfg->tp_lock, cfg->tp_raw, cfg->tp_limit};
        for (unsigned c = 0; c < (limit ? 3u : 2u); c++) {
            for (unsigned i = 0; i < cfg->tp_points; i++)
                fprintf(g, "%u %.1f\n", cfg->tp_concurrency[i], curves[c][i]);
            fprintf(g, "e\n");
        }
    } else {
        fprintf(g, "set label 'throughput scenario not run' at graph 0.3,0.5\n"
                   "plot [1:10][0:1] NaN notitle\n"); /* fixed ranges: no data to scale by */
        fprintf(g, "unset label\n");
    }
    fprintf(g, "unset logscale x\nset title 'scale: 64 cycles in flight'\n"
               "set xlabel 'nodes'\nset ylabel 'cycles per second'\nset key top right\n"
               "set xtics 1,2\nset yrange [0:*]\n");
    if (cfg->scale_points > 0) {
        fprintf(g, "plot '-' with linespoints lw 2 title 'libredlock', '-' with linespoints lw 2 "
                   "dt 2 title 'raw fan-out'\n");
        for (unsigned i = 0; i < cfg->scale_points; i++)
            fprintf(g, "%u %.1f\n", cfg->scale_nodes[i], cfg->scale_lock[i]);
        fprintf(g, "e\n");
        for (unsigned i = 0; i < cfg->scale_points; i++)
            fprintf(g, "%u %.1f\n", cfg->scale_nodes[i], cfg->scale_raw[i]);
        fprintf(g, "e\n");
    } else {
        fprintf(g, "set label 'scale scenario not run' at graph 0.3,0.5\n"
                   "plot [1:10][0:1] NaN notitle\n"); /* fixed ranges: no data to scale by */
    }
    fprintf(g, "unset multiplot\n");
    if (pclose(g) != 0)
        fprintf(stderr, "redlock-bench: gnuplot failed\n");
    else
        printf("plot: %s\n", cfg->plot_path);
}
