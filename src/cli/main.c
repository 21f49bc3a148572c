/* main.c - the `nnroute` command: a table of subcommands and the dispatch. */
#include "cli/cli.h"
#include "util/version.h"

#include <stdio.h>
#include <string.h>

static const struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} commands[] = {
    {"run", nr_cli_run, "run a model with the reference executor, write outputs as .npy"},
    {"conformance", nr_cli_conformance,
     "run ONNX backend test directories and compare with their expected outputs"},
    {"build", nr_cli_build, "compile a model along a build route into an engine file"},
    {"check-knobs", nr_cli_check_knobs,
     "build every non-default knob value of a model and report values that change nothing"},
    {"check-routes", nr_cli_check_routes,
     "build and run random routes of a model and check them against the reference"},
    {"bench", nr_cli_bench,
     "time inferences of an engine or model: median, percentiles, 95% CI"},
    {"tune", nr_cli_tune,
     "search build routes for the fastest engine within an accuracy tolerance"},
    {"report", nr_cli_report,
     "choose again from a tuning session at another tolerance or metric"},
    {"ops", nr_cli_ops, "list the supported operators (--markdown for docs/operators.md)"},
    {"inspect", nr_cli_inspect,
     "show an engine: route, fingerprint, memory and the tactic of every step"},
    {"knobs", nr_cli_knobs, "list the knobs a build route sets, for nnroute or one model"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: nnroute COMMAND [ARGS]   (nnroute COMMAND --help for details)\n\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "\nnnroute %s\n", NR_VERSION_STRING);
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("nnroute %s (sources %s)\n", nr_version(), nr_version_sources());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name))
      return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "nnroute: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
