/* ptxtune devices: the CUDA devices and what the tuner knows of them. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "tuner/backend.h"

static const char devices_usage[] =
    "usage: ptxtune devices [--json]\n"
    "Lists the CUDA devices: name, compute capability, SMs, L2, opt-in shared memory\n"
    "per block, SM and memory clocks, memory, peak bandwidth and flops (from the clocks),\n"
    "driver version, UUID. The driver (libcuda.so.1) is loaded at run time.\n"
    "Exit: 0 listed; 1 the driver failed; 4 no CUDA driver found (libcuda.so.1).\n";

static const struct option devices_opts[] = {
    {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

int cmd_devices(int argc, char **argv)
{
    bool json = false;
    optind = 1;
    opterr = 0; /* one line of our own on bad options */
    int c;
    while ((c = getopt_long(argc, argv, ":", devices_opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'h': fputs(devices_usage, stdout); return 0;
        default: cli_opt_error(c, argv);
        }
    }
    if (optind != argc)
        cli_die(2, "unexpected argument '%s'", argv[optind]);
    tuner_devinfo d[16];
    int n = 0;
    pt_err e = {0};
    int rc = tuner_cuda_list(d, 16, &n, &e);
    if (rc == PT_ENODRIVER)
        cli_die(CLI_EXIT_NODRIVER, "%s", e.msg);
    if (rc)
        cli_die(1, "%s", e.msg);
    if (n > 16)
        n = 16;
    if (json) {
        pt_buf b;
        pt_buf_init(&b);
        pt_buf_putc(&b, '[');
        for (int i = 0; i < n; i++) {
            if (i)
                pt_buf_putc(&b, ',');
            tuner_devinfo_json(&d[i], &b);
        }
        pt_buf_putc(&b, ']');
        puts(b.s);
        pt_buf_free(&b);
        return 0;
    }
    printf("%-3s %-24s %-4s %4s %6s %8s %7s %7s %5s %7s %9s %7s %9s %6s  %s\n", "dev", "name", "cc",
           "SMs", "L2_MB", "smem_KB", "SM_MHz", "mem_MHz", "bus", "mem_GB", "peak_GB/s", "fp32_TF",
           "tensor_TF", "driver", "uuid");
    for (int i = 0; i < n; i++)
        printf("%-3d %-24s %d.%-2d %4d %6.1f %8d %7d %7d %5d %7.1f %9.0f %7.1f %9.1f %3d.%-2d  %s\n",
               d[i].ordinal, d[i].name, d[i].cc_major, d[i].cc_minor, d[i].sm_count,
               (double)d[i].l2_bytes / (1 << 20), d[i].smem_optin >> 10, d[i].clock_khz / 1000,
               d[i].mem_clock_khz / 1000, d[i].mem_bus_bits, (double)d[i].total_mem / 1e9,
               d[i].peak_gbs, d[i].peak_fp32_tflops, d[i].peak_tensor_tflops,
               d[i].driver_version / 1000, d[i].driver_version % 1000 / 10, d[i].uuid);
    if (!n)
        puts("no CUDA devices");
    return 0;
}
