/* The HIP calls the hip backend (hip*.c) makes, mapped onto CUDA's runtime API for NVIDIA
 * builds (-Dhip_platform=nvidia). Only what it uses is here: Debian's HIP 5.2 NVIDIA
 * headers do not compile against CUDA 13, and a small table we own is easier to keep right. */
#ifndef SSEQ_HIP_NVIDIA_H
#define SSEQ_HIP_NVIDIA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef struct cudaDeviceProp hipDeviceProp_t;
/* Modules go through the runtime's library API (CUDA >= 12.5), not the driver API: the
 * daemon then never links libcuda, so an NVIDIA build still starts, and falls back to
 * the sim, on a machine without the driver. cudaLaunchKernel takes a cudaKernel_t. */
typedef cudaLibrary_t hipModule_t;
typedef cudaKernel_t hipFunction_t;

#define hipSuccess cudaSuccess
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorInvalidDevicePointer cudaErrorInvalidDevicePointer
#define hipErrorInvalidResourceHandle cudaErrorInvalidResourceHandle
#define hipErrorInvalidConfiguration cudaErrorInvalidConfiguration
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorInitializationError cudaErrorInitializationError
#define hipErrorFileNotFound cudaErrorFileNotFound
#define hipErrorNotFound cudaErrorSymbolNotFound
#define hipErrorInvalidImage cudaErrorInvalidKernelImage
#define hipErrorNoBinaryForGpu cudaErrorNoKernelImageForDevice
#define hipErrorSharedObjectInitFailed cudaErrorSharedObjectInitFailed
#define hipErrorHostMemoryAlreadyRegistered cudaErrorHostMemoryAlreadyRegistered
#define hipErrorHostMemoryNotRegistered cudaErrorHostMemoryNotRegistered
#define hipErrorNotSupported cudaErrorNotSupported
#define hipErrorLaunchOutOfResources cudaErrorLaunchOutOfResources
#define hipErrorIllegalAddress cudaErrorIllegalAddress
#define hipErrorLaunchTimeOut cudaErrorLaunchTimeout
#define hipErrorAssert cudaErrorAssert
#define hipErrorLaunchFailure cudaErrorLaunchFailure
#define hipErrorECCNotCorrectable cudaErrorECCUncorrectable

#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventDefault cudaEventDefault
#define hipEventDisableTiming cudaEventDisableTiming
#define hipHostRegisterDefault cudaHostRegisterDefault
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice

#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipDeviceReset cudaDeviceReset
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventQuery cudaEventQuery
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamQuery cudaStreamQuery
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpyAsync cudaMemcpyAsync
#define hipHostRegister cudaHostRegister
#define hipHostUnregister cudaHostUnregister

/* With lazy loading (CUDA's default) the library call accepts any file, a text file as
 * PTX to compile later, and the failure would surface at the first launch. Counting the
 * kernels (CUDA >= 12.4) makes the driver read the image now, as hipModuleLoad does on
 * AMD: an error, or an image without kernels, fails the load. */
static inline hipError_t hipModuleLoad(hipModule_t *module, const char *path)
{
	unsigned count = 0;
	cudaError_t e = cudaLibraryLoadFromFile(module, path, NULL, NULL, 0, NULL, NULL, 0);

	if (e != cudaSuccess)
		return e;
	e = cudaLibraryGetKernelCount(&count, *module);
	if (e == cudaSuccess && count == 0)
		e = cudaErrorInvalidKernelImage;
	if (e != cudaSuccess)
		cudaLibraryUnload(*module);
	return e;
}

static inline hipError_t hipModuleUnload(hipModule_t module)
{
	return cudaLibraryUnload(module);
}

/* A module's __constant__ or __device__ variable: its device address and size. */
typedef void *hipDeviceptr_t;

static inline hipError_t hipModuleGetGlobal(
	hipDeviceptr_t *dptr, size_t *bytes, hipModule_t module, const char *name)
{
	return cudaLibraryGetGlobal(dptr, bytes, module, name);
}

static inline hipError_t hipModuleGetFunction(
	hipFunction_t *f, hipModule_t module, const char *name)
{
	return cudaLibraryGetKernel(f, module, name);
}

/* A module's functions (CUDA >= 12.4). HIP has no such call: on AMD the backend says
 * listing is not supported. */
static inline hipError_t hipModuleGetFunctionCount(unsigned *count, hipModule_t module)
{
	return cudaLibraryGetKernelCount(count, module);
}

static inline hipError_t hipModuleEnumerateFunctions(
	hipFunction_t *fns, unsigned count, hipModule_t module)
{
	return cudaLibraryEnumerateKernels(fns, count, module);
}

/* The function's (mangled) name; the runtime owns the string. */
static inline hipError_t hipFuncGetName(const char **name, hipFunction_t f)
{
	return cudaFuncGetName(name, (const void *)f);
}

/* The cudaFunc* calls take a cudaKernel_t cast to a pointer "and use it as is" (their
 * docs); cudaKernelSetAttributeForDevice would be overridden by cudaFuncSetAttribute
 * anyway, and wants stricter locking. */
typedef struct cudaFuncAttributes hipFuncAttributes;
static inline hipError_t hipModuleFuncGetAttributes(hipFuncAttributes *attrs, hipFunction_t f)
{
	return cudaFuncGetAttributes(attrs, (const void *)f);
}

static inline hipError_t hipModuleFuncSetMaxDynamicShared(hipFunction_t f, int bytes)
{
	return cudaFuncSetAttribute(
		(const void *)f, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

/* A parameter's offset and size in the function's parameter space (CUDA >= 12.4):
 * cudaErrorInvalidValue past the last. HIP 5.2 has no such call. */
static inline hipError_t hipFuncGetParamInfo(
	hipFunction_t f, size_t index, size_t *offset, size_t *size)
{
	return cudaFuncGetParamInfo((const void *)f, index, offset, size);
}

/* Blocks of `threads` threads and `shared` bytes of dynamic shared memory one
 * multiprocessor holds at once (HIP's call of the same name). */
static inline hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(
	int *blocks, hipFunction_t f, int threads, size_t shared)
{
	return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		blocks, (const void *)f, threads, shared);
}

/* All blocks co-resident (cooperative_groups' grid.sync()): HIP's shape of the call. */
static inline hipError_t hipModuleLaunchCooperativeKernel(hipFunction_t f, unsigned gx, unsigned gy,
	unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, hipStream_t stream,
	void **params)
{
	dim3 grid = {gx, gy, gz}, block = {bx, by, bz};

	return cudaLaunchCooperativeKernel((const void *)f, grid, block, params, shared, stream);
}

/* A launch in thread-block clusters of cluster[0..2] blocks (sm_90 and later), through
 * cudaLaunchKernelExC's cluster attribute. HIP has no such call: the name is ours. */
static inline hipError_t hipModuleLaunchKernelCluster(hipFunction_t f, const uint32_t grid[3],
	const uint32_t block[3], const uint32_t cluster[3], unsigned shared, hipStream_t stream,
	void **params)
{
	cudaLaunchAttribute attr;
	cudaLaunchConfig_t cfg;

	memset(&attr, 0, sizeof(attr));
	memset(&cfg, 0, sizeof(cfg));
	attr.id = cudaLaunchAttributeClusterDimension;
	attr.val.clusterDim.x = cluster[0];
	attr.val.clusterDim.y = cluster[1];
	attr.val.clusterDim.z = cluster[2];
	cfg.gridDim = (dim3){grid[0], grid[1], grid[2]};
	cfg.blockDim = (dim3){block[0], block[1], block[2]};
	cfg.dynamicSmemBytes = shared;
	cfg.stream = stream;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	return cudaLaunchKernelExC(&cfg, (const void *)f, params);
}

/* cuLaunchKernel's shape; `extra` (packed arguments) is not used by the backend. */
static inline hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy,
	unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, hipStream_t stream,
	void **params, void **extra)
{
	dim3 grid = {gx, gy, gz}, block = {bx, by, bz};

	if (extra)
		return cudaErrorInvalidValue;
	return cudaLaunchKernel((const void *)f, grid, block, params, shared, stream);
}

#endif
