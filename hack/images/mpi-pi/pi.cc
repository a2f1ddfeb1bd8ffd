// Estimates pi by Monte Carlo across the MPI ranks, as mpi-operator's examples/v2beta1/pi does:
// every rank samples points in the square, rank 0 reduces the hits and prints the estimate.
// The barrier before MPI_Finalize is upstream's too (added with its move to Debian bookworm):
// without it bookworm's MPICH 4.0 (ch4:ucx) can deadlock in MPI_Finalize: rank 1 (which only
// sent, in the Reduce) waits in finalize's PMI barrier without progressing UCX, while rank 0 spins
// in its UCX disconnect on a request that rank 1 never reads (MPICH 4.2 drops that barrier,
// pmodels/mpich#6596).
#include <mpi.h>

#include <cstdio>
#include <random>

int main(int argc, char *argv[]) {
  int rank, workers, name_len;
  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &workers);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char hostname[MPI_MAX_PROCESSOR_NAME];
  MPI_Get_processor_name(hostname, &name_len);
  if (rank == 0) std::printf("Workers: %d\n", workers);
  std::printf("Rank %d on host %s\n", rank, hostname);

  std::minstd_rand generator(rank);
  std::uniform_real_distribution<double> distribution(-1.0, 1.0);
  const long long tests = 10000000;
  long long hits = 0;
  for (long long i = 0; i < tests; i++) {
    double x = distribution(generator), y = distribution(generator);
    if (x * x + y * y <= 1.0) hits++;
  }
  long long total = 0;
  MPI_Reduce(&hits, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double pi = 4.0 * static_cast<double>(total) / static_cast<double>(tests) / workers;
    std::printf("pi is approximately %.16f\n", pi);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
