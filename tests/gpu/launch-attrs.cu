// Launch attributes on the GPU (tests/gpu/launch-attrs.sh): a cooperative kernel that
// synchronises the whole grid (cooperative_groups' grid.sync()), and kernels run in
// thread-block clusters (the cluster's shape from the launch attribute, read back
// through cooperative_groups' cluster_group). Each writes what a host check verifies.
// nvcc -fatbin -arch=sm_90 -o launch-attrs.fatbin tests/gpu/launch-attrs.cu
#include <cooperative_groups.h>
#include <stdint.h>

namespace cg = cooperative_groups;

// Every thread adds 1 to *counter, the grid synchronises, and then every thread reads
// the total: out[i] = the counter as thread i saw it after grid.sync(), which is the
// grid's thread count for all of them only if the launch was really cooperative (a
// plain launch of a grid larger than fits would hang; is_valid() says whether the grid
// group may sync at all, and it is written to valid[0]).
extern "C" __global__ void coop_sum(unsigned *counter, unsigned *out, unsigned *valid)
{
	cg::grid_group grid = cg::this_grid();
	const unsigned long long i = grid.thread_rank();

	if (i == 0)
		valid[0] = grid.is_valid() ? 1u : 0u;
	if (!grid.is_valid())
		return;
	atomicAdd(counter, 1u);
	grid.sync();
	out[i] = atomicAdd(counter, 0u);
}

// Each block writes, at its block index: its cluster's dimensions (x, y, z) as the
// device sees them, its rank in the cluster, and a sum over the cluster through
// distributed shared memory (every block's rank + 1, read from each block's shared
// memory by rank 0): 4 unsigned per block.
extern "C" __global__ void cluster_info(unsigned *out)
{
	__shared__ unsigned mine;
	cg::cluster_group cluster = cg::this_cluster();
	const dim3 dims = cluster.dim_blocks();
	const unsigned rank = cluster.block_rank();
	const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
	unsigned sum = 0;

	if (threadIdx.x == 0)
		mine = rank + 1;
	cluster.sync();
	if (threadIdx.x == 0 && rank == 0)
		for (unsigned r = 0; r < cluster.num_blocks(); r++)
			sum += *cluster.map_shared_rank(&mine, r);
	cluster.sync(); // the others' shared memory stays until rank 0 read it
	if (threadIdx.x == 0) {
		out[4 * b + 0] = dims.x * 100u + dims.y * 10u + dims.z;
		out[4 * b + 1] = rank;
		out[4 * b + 2] = rank == 0 ? sum : 0u;
		out[4 * b + 3] = 1u;
	}
}

// A kernel compiled with a fixed cluster shape: launched without the attribute it still
// runs in clusters of 2 (the launch shows the shape it got).
extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_fixed(unsigned *out)
{
	cg::cluster_group cluster = cg::this_cluster();

	if (threadIdx.x == 0)
		out[blockIdx.x] = cluster.dim_blocks().x * 100u + cluster.block_rank();
}
