// berth: one binary, subcommands. Errors in the operator's input exit 2 with the message.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"
#include "config/config_error.h"

int main(int argc, char** argv) {
  CLI::App app{"berth: a topology-aware, fair, elastic GPU scheduler"};
  app.require_subcommand(1);
  berth::AddCellsCommand(app);
  berth::AddBenchCommand(app);
  berth::AddSimCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const berth::ConfigError& e) {
    std::cerr << "berth: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
