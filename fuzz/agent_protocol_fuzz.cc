// The agent protocol's messages (protocol/agent_protocol.h) as the server reads them from any
// holder of an agent token (registration, report) and an agent reads them from the server
// (assignments). The first byte picks the message, the rest is its JSON body. A refusal is a
// ProtocolError naming the field, in valid UTF-8 (the server sends it back inside JSON); a
// message taken must survive the trip back to JSON and be read the same. Seeds:
// fuzz/seeds/agent_protocol/.

#include "fuzz_input.h"
#include "protocol/agent_protocol.h"

namespace {

using Json = nlohmann::json;

// Reads `body` as `parse` does, then writes it back and reads that again.
template <typename Parse>
void RoundTrip(const Json& body, Parse parse) {
  Json written;
  try {
    written = berth::ToJson(parse(body));
  } catch (const berth::ProtocolError& e) {
    const std::string message = e.what();
    try {
      (void)Json(message).dump();  // throws on invalid UTF-8, as the server's reply would
    } catch (const Json::exception&) {
      berth::Finding(std::string("a refusal that is not valid UTF-8: ") + message);
    }
    // "FIELD: what" (FIELD a path such as containers[3].state), or the body's own kind.
    const size_t colon = message.find(": ");
    if (message != "expected an object" &&
        (colon == std::string::npos || colon == 0 || message.find_first_of(" \"", 0) < colon))
      berth::Finding(std::string("a refusal that names no field: ") + message);
    return;
  }
  std::string text;
  try {
    text = written.dump();
  } catch (const Json::exception& e) {
    berth::Finding(std::string("a message taken that cannot be written back: ") + e.what());
  }
  try {
    if (berth::ToJson(parse(Json::parse(text))) != written)
      berth::Finding(std::string("a message read back differently: ") + text);
  } catch (const std::exception& e) {
    berth::Finding(std::string("a message written back is refused: ") + std::string(e.what()) +
                   ": " + text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The server and the agent both refuse a body that is not JSON before reading it.
  const Json body = Json::parse(data + 1, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  switch (data[0] % 3) {
    case 0:
      RoundTrip(body, berth::ParseRegistration);
      break;
    case 1:
      RoundTrip(body, berth::ParseAssignments);
      break;
    default:
      RoundTrip(body, berth::ParseReport);
      break;
  }
  return 0;
}
