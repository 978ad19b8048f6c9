// berth: one binary, subcommands. Errors in the operator's input exit 2 with the message; any
// other failure exits 1 with a message too, never an abort.
#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <new>

#include "cli/commands.h"
#include "config/config_error.h"

int main(int argc, char** argv) {
  // A peer that closes a connection is an error to report (client) or to drop (server), not a
  // reason to die.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"berth: a topology-aware, fair, elastic GPU scheduler"};
  app.set_version_flag("--version", std::string("berth ") + BERTH_VERSION);
  app.require_subcommand(1);
  // --limit may also follow the subcommand (berth cells --limit nodes=2 ...).
  app.fallthrough();
  berth::AddLimitOption(app);
  berth::AddCellsCommand(app);
  berth::AddBenchCommand(app);
  berth::AddBenchApiCommand(*app.get_subcommand("bench"));
  berth::AddBenchK8sCommand(*app.get_subcommand("bench"));
  berth::AddBenchRunCommand(*app.get_subcommand("bench"));
  berth::AddSimCommand(app);
  berth::AddServerCommand(app);
  berth::AddTokenCommand(app);
  berth::AddClientCommands(app);
  berth::AddTopCommand(app);
  berth::AddAgentCommands(app);
  // CLI11's refusals read like berth's others ("berth: ..."), for scripts that look for it.
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    return "berth: " + CLI::FailureMessage::simple(failed, e);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help) but gives each kind of refusal its own code
    // (104, 105, 114...); a refused command-line value is the operator's input like any other.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const berth::ConfigError& e) {
    std::cerr << "berth: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "berth: out of memory; the input is larger than this machine can hold\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "berth: internal error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "berth: internal error: an unknown exception\n";
    return 1;
  }
  return 0;
}
