// Everything one benchmark run measured, as the report reads it: the record the measuring phases fill
// and the report modules (report.ts and the sections beside it) take apart.
import type { BridgeResult } from "./bridge.ts";
import type { FloodResult } from "./flood.ts";
import type { FirstCellResult, MemoryResult, SpawnResult, WarmResult } from "./phases.ts";
import type { GrowthResult, SessionsResult } from "./scaling.ts";

export interface Results {
  spawn: SpawnResult;
  firstCell: FirstCellResult;
  warm: WarmResult;
  memory: MemoryResult;
  sessions: SessionsResult;
  growth: GrowthResult;
  flood: FloodResult;
  bridge: BridgeResult;
}
