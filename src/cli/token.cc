// `berth token new` and `berth token hash`: what an admin needs to write a tokens file
// (docs/api.md) without ever storing a token in it.
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "config/config_error.h"
#include "server/access.h"

namespace berth {

void AddTokenCommand(CLI::App& app) {
  auto* token = app.add_subcommand("token", "Make tokens for the server's tokens file");
  token->require_subcommand(1);
  token->add_subcommand("new", "Print a fresh random token (give it to its user once)")
      ->callback([] { std::cout << NewToken() << "\n"; });
  token
      ->add_subcommand("hash",
                       "Read a token on stdin, print its SHA-256 for the tokens file's sha256")
      ->callback([] {
        // On stdin, not as an argument: arguments are visible to every user in ps.
        std::string line;
        if (!std::getline(std::cin, line) || line.empty())
          throw ConfigError("token hash: expected the token on stdin, got nothing");
        if (line.size() > 4096)
          throw ConfigError("token hash: a token of more than 4096 characters; check the input");
        std::cout << Sha256Hex(line) << "\n";
      });
}

}  // namespace berth
