// A DCGM exporter's /metrics page (ParseDcgmMetrics) as the node agent scrapes it. A page taken
// must give GPU records the agent can report: each whole GPU's values, as the agent's heartbeat
// carries them, pass the server's reading of a report. Seeds: tests/data/agent/dcgm/.
#include <cstdio>
#include <cstdlib>

#include "agent/dcgm_metrics.h"
#include "fuzz_input.h"
#include "protocol/agent_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::DcgmScrape scrape;
  bool taken = false;
  berth::LoadOrRefuse("dcgm", [&] {
    scrape = berth::ParseDcgmMetrics(berth::InputText(data, size), "dcgm");
    taken = true;
  });
  if (!taken) return 0;
  berth::AgentReport report;
  for (const berth::DcgmGpuMetrics& m : scrape.gpus)
    if (m.mig_instance < 0) report.gpus.push_back(berth::ToGpuReport(m.gpu, m));
  try {
    berth::ParseReport(berth::ToJson(report));
  } catch (const berth::ProtocolError& e) {
    std::fprintf(stderr, "berth fuzz: the server refuses the report of a page taken: %s\n",
                 e.what());
    std::abort();
  }
  return 0;
}
