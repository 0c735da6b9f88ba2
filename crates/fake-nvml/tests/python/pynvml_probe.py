"""Call what gpustat and a pynvml-based exporter call on every GPU; print one JSON document.

Run by crates/fake-nvml/tests/python_clients.rs against the fake
libnvidia-ml.so.1. Every call is recorded: its value, or the NVML error's
class name (`NVMLError_NotSupported`, ...), so the Rust test can assert both.
"""

import json
import sys

import pynvml as N


def call(fn, *args):
    try:
        value = fn(*args)
    except N.NVMLError as e:
        return {"error": type(e).__name__}
    return {"value": plain(value)}


def plain(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if hasattr(v, "_fields_"):
        return {name: plain(getattr(v, name)) for name, _ in v._fields_}
    if hasattr(v, "__dict__"):
        return {k: plain(x) for k, x in vars(v).items() if not k.startswith("_")}
    return v


def field_values(h, ids):
    out = {}
    for v in N.nvmlDeviceGetFieldValues(h, ids):
        if v.nvmlReturn != N.NVML_SUCCESS:
            out[str(v.fieldId)] = {"error": N.nvmlErrorString(v.nvmlReturn)}
        elif v.valueType == N.NVML_VALUE_TYPE_UNSIGNED_INT:
            out[str(v.fieldId)] = {"value": v.value.uiVal, "type": "uint"}
        elif v.valueType == N.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
            out[str(v.fieldId)] = {"value": v.value.ullVal, "type": "ulonglong"}
        else:
            out[str(v.fieldId)] = {"error": "unexpected value type %d" % v.valueType}
    return out


def gpu(i):
    h = N.nvmlDeviceGetHandleByIndex(i)
    return {
        "index": call(N.nvmlDeviceGetIndex, h),
        "name": call(N.nvmlDeviceGetName, h),
        "uuid": call(N.nvmlDeviceGetUUID, h),
        "serial": call(N.nvmlDeviceGetSerial, h),
        "board_part_number": call(N.nvmlDeviceGetBoardPartNumber, h),
        "brand": call(N.nvmlDeviceGetBrand, h),
        "minor_number": call(N.nvmlDeviceGetMinorNumber, h),
        "vbios": call(N.nvmlDeviceGetVbiosVersion, h),
        "inforom_image": call(N.nvmlDeviceGetInforomImageVersion, h),
        "inforom_ecc": call(N.nvmlDeviceGetInforomVersion, h, N.NVML_INFOROM_ECC),
        "inforom_power": call(N.nvmlDeviceGetInforomVersion, h, N.NVML_INFOROM_POWER),
        "pci_bus_id": call(lambda: N.nvmlDeviceGetPciInfo(h).busId),
        "display_mode": call(N.nvmlDeviceGetDisplayMode, h),
        "display_active": call(N.nvmlDeviceGetDisplayActive, h),
        "persistence_mode": call(N.nvmlDeviceGetPersistenceMode, h),
        "compute_mode": call(N.nvmlDeviceGetComputeMode, h),
        "driver_model": call(N.nvmlDeviceGetDriverModel, h),
        "memory_v1": call(N.nvmlDeviceGetMemoryInfo, h),
        "memory_v2": call(N.nvmlDeviceGetMemoryInfo, h, N.nvmlMemory_v2),
        "bar1": call(N.nvmlDeviceGetBAR1MemoryInfo, h),
        "temperature": call(N.nvmlDeviceGetTemperature, h, N.NVML_TEMPERATURE_GPU),
        "fan_speed": call(N.nvmlDeviceGetFanSpeed, h),
        "num_fans": call(N.nvmlDeviceGetNumFans, h),
        "pstate": call(N.nvmlDeviceGetPerformanceState, h),
        "utilization": call(N.nvmlDeviceGetUtilizationRates, h),
        "encoder": call(N.nvmlDeviceGetEncoderUtilization, h),
        "decoder": call(N.nvmlDeviceGetDecoderUtilization, h),
        "power_usage": call(N.nvmlDeviceGetPowerUsage, h),
        "power_limit": call(N.nvmlDeviceGetPowerManagementLimit, h),
        "power_default_limit": call(N.nvmlDeviceGetPowerManagementDefaultLimit, h),
        "power_constraints": call(N.nvmlDeviceGetPowerManagementLimitConstraints, h),
        "power_enforced": call(N.nvmlDeviceGetEnforcedPowerLimit, h),
        "energy": call(N.nvmlDeviceGetTotalEnergyConsumption, h),
        "clock_sm": call(N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_SM),
        "clock_mem": call(N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_MEM),
        "clock_graphics": call(N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_GRAPHICS),
        "clock_video": call(N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_VIDEO),
        "max_clock_sm": call(N.nvmlDeviceGetMaxClockInfo, h, N.NVML_CLOCK_SM),
        "max_clock_mem": call(N.nvmlDeviceGetMaxClockInfo, h, N.NVML_CLOCK_MEM),
        "app_clock_graphics": call(N.nvmlDeviceGetApplicationsClock, h, N.NVML_CLOCK_GRAPHICS),
        "clock_app_default_mem": call(
            N.nvmlDeviceGetClock, h, N.NVML_CLOCK_MEM, N.NVML_CLOCK_ID_APP_CLOCK_DEFAULT
        ),
        "pcie_tx": call(N.nvmlDeviceGetPcieThroughput, h, N.NVML_PCIE_UTIL_TX_BYTES),
        "pcie_rx": call(N.nvmlDeviceGetPcieThroughput, h, N.NVML_PCIE_UTIL_RX_BYTES),
        "pcie_replay": call(N.nvmlDeviceGetPcieReplayCounter, h),
        "pcie_gen": call(N.nvmlDeviceGetCurrPcieLinkGeneration, h),
        "pcie_gen_max": call(N.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie_width": call(N.nvmlDeviceGetCurrPcieLinkWidth, h),
        "pcie_width_max": call(N.nvmlDeviceGetMaxPcieLinkWidth, h),
        "ecc_mode": call(N.nvmlDeviceGetEccMode, h),
        "compute_processes": call(N.nvmlDeviceGetComputeRunningProcesses, h),
        "compute_processes_v2": call(N.nvmlDeviceGetComputeRunningProcesses_v2, h),
        "graphics_processes": call(N.nvmlDeviceGetGraphicsRunningProcesses, h),
        "graphics_processes_v2": call(N.nvmlDeviceGetGraphicsRunningProcesses_v2, h),
        "mps_processes": call(N.nvmlDeviceGetMPSComputeRunningProcesses, h),
        "process_utilization": call(N.nvmlDeviceGetProcessUtilization, h, 0),
        "fields": field_values(
            h,
            [
                N.NVML_FI_DEV_MEMORY_TEMP,
                N.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
                N.NVML_FI_DEV_PCIE_REPLAY_COUNTER,
                N.NVML_FI_DEV_REMAPPED_COR,
                N.NVML_FI_DEV_REMAPPED_UNC,
                N.NVML_FI_DEV_REMAPPED_PENDING,
                N.NVML_FI_DEV_REMAPPED_FAILURE,
                N.NVML_FI_DEV_ECC_CURRENT,
                (N.NVML_FI_DEV_POWER_INSTANT, N.NVML_POWER_SCOPE_GPU),
                N.NVML_FI_DEV_PERF_POLICY_THERMAL,
            ],
        ),
    }


def main():
    N.nvmlInit()
    out = {
        "driver": call(N.nvmlSystemGetDriverVersion),
        "nvml": call(N.nvmlSystemGetNVMLVersion),
        "cuda": call(N.nvmlSystemGetCudaDriverVersion),
        "count": N.nvmlDeviceGetCount(),
    }
    out["gpus"] = [gpu(i) for i in range(out["count"])]
    pids = sys.argv[1:]
    out["process_names"] = {p: call(N.nvmlSystemGetProcessName, int(p)) for p in pids}
    N.nvmlShutdown()
    json.dump(out, sys.stdout)


main()
