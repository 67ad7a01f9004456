// A board's or a stored session's wire settings as the registry's WireSpec (protocol/
// wire_format.h builds the decoder), and the SWO settings as sessions store them.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/config/config.h"
#include "gmon/profile_pipeline.h"
#include "gmon/symbolizer.h"
#include "protocol/wire_format.h"
#include "storage/session_store.h"

namespace rackprof::daemon::ingest {

using protocol::WireSpec;

// The wire a board's configuration describes (its code range comes from its ELF, later).
WireSpec wire_spec_of(const config::BoardConfig& board);

// The wire a stored session was captured with (its code range is the caller's to add).
WireSpec wire_spec_of(const storage::NewSession& session);

// The ELF's code range as decoders check addresses against it (none for an ELF above 4 GiB:
// wire addresses are 32-bit).
std::optional<protocol::AddressRange> decode_range_of(const gmon::Symbolizer* elf);

// The text range a target announced in its HELLO, as the profile pipeline takes it.
std::optional<gmon::CodeRange> announced_range(const storage::TargetInfo& target);
// What a HELLO says about the target, as a session keeps it.
storage::TargetInfo target_info_of(const protocol::TargetHello& hello);
// Why the target's architecture (its HELLO's) cannot be the ELF's: "the target says it is
// rv32imac (riscv), but app.elf is arm code (armv7-m)"; "" when they agree or one does not say.
std::string arch_conflict(const storage::TargetInfo& target, const gmon::Symbolizer& elf);

// The itm settings as a session stores them (JSON), so a re-decode reads the ports alike;
// "" reads as the defaults (sessions of other protocols, older sessions).
std::string swo_options_json(const protocol::SwoOptions& swo);
// What a session stores of a wire's further settings: "" unless its protocol has any.
std::string wire_options_json(const WireSpec& wire);
protocol::SwoOptions swo_options_from_json(const std::string& text);

}  // namespace rackprof::daemon::ingest
