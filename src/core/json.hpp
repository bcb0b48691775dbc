// All JSON mapping of d2k's plain structs, in one place (nlohmann::json to_json/from_json, found by
// argument-dependent lookup). Enums are written as their names ("bf16", "cuda"); from_json throws
// d2k::Error naming the field and the value it could not read.
#pragma once

#include <nlohmann/json.hpp>

#include "core/ceilings.hpp"
#include "core/repeat.hpp"
#include "core/trace.hpp"
#include "core/worker_protocol.hpp"

namespace d2k {

// core/device.hpp, core/dtype.hpp: as their names
void to_json(nlohmann::json& j, Device value);
void from_json(const nlohmann::json& j, Device& value);
void to_json(nlohmann::json& j, DType value);
void from_json(const nlohmann::json& j, DType& value);

// core/worker_protocol.hpp
void to_json(nlohmann::json& j, const WireTensor& value);
void from_json(const nlohmann::json& j, WireTensor& value);
void to_json(nlohmann::json& j, const WireScalar& value);
void from_json(const nlohmann::json& j, WireScalar& value);
void to_json(nlohmann::json& j, const TimingConfig& value);
void from_json(const nlohmann::json& j, TimingConfig& value);
void to_json(nlohmann::json& j, const WorkerRequest& value);
void from_json(const nlohmann::json& j, WorkerRequest& value);
void to_json(nlohmann::json& j, const GuardViolation& value);
void from_json(const nlohmann::json& j, GuardViolation& value);
void to_json(nlohmann::json& j, Stage value);
void from_json(const nlohmann::json& j, Stage& value);
void to_json(nlohmann::json& j, WorkerStatus value);
void from_json(const nlohmann::json& j, WorkerStatus& value);
void to_json(nlohmann::json& j, const WorkerFailure& value);
void from_json(const nlohmann::json& j, WorkerFailure& value);
void to_json(nlohmann::json& j, const SecondClockReport& value);
void from_json(const nlohmann::json& j, SecondClockReport& value);
void to_json(nlohmann::json& j, const TimingReport& value);
void from_json(const nlohmann::json& j, TimingReport& value);

void to_json(nlohmann::json& j, const Ceilings& value);
void from_json(const nlohmann::json& j, Ceilings& value);

// Traces (core/trace.hpp); written for people and machines, read back by `d2k report` and tests.
void to_json(nlohmann::json& j, Status value);
void from_json(const nlohmann::json& j, Status& value);
void to_json(nlohmann::json& j, const Comparison& value);
void from_json(const nlohmann::json& j, Comparison& value);
void to_json(nlohmann::json& j, const TimingSummary& value);
void from_json(const nlohmann::json& j, TimingSummary& value);
void to_json(nlohmann::json& j, const ClockReading& value);
void from_json(const nlohmann::json& j, ClockReading& value);
void to_json(nlohmann::json& j, const GpuClocks& value);
void from_json(const nlohmann::json& j, GpuClocks& value);
void to_json(nlohmann::json& j, const OutsideClock& value);
void from_json(const nlohmann::json& j, OutsideClock& value);
void to_json(nlohmann::json& j, const SecondClock& value);
void from_json(const nlohmann::json& j, SecondClock& value);
void to_json(nlohmann::json& j, const Phase& value);
void from_json(const nlohmann::json& j, Phase& value);
void to_json(nlohmann::json& j, const Performance& value);
void from_json(const nlohmann::json& j, Performance& value);
void to_json(nlohmann::json& j, const Trace& value);
struct Overhead;  // core/overhead.hpp
void to_json(nlohmann::json& j, const Overhead& value);
void from_json(const nlohmann::json& j, Trace& value);
void to_json(nlohmann::json& j, const RepeatRow& value);
struct RunSummary;  // core/summary.hpp
void to_json(nlohmann::json& j, const RunSummary& value);

}  // namespace d2k
