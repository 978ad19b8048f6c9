// berth's subcommands. Each Add*Command registers one subcommand and its options on the app.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/cluster.h"

namespace berth {

void AddCellsCommand(CLI::App& app);
void AddBenchCommand(CLI::App& app);
void AddSimCommand(CLI::App& app);

// The cluster named on the command line: a cluster file (YAML), an openb node list (.csv), or
// the embedded default (examples/multi-rack.yaml) when `path` is empty. Throws ConfigError.
Cluster LoadClusterArgument(const std::string& path);

}  // namespace berth
