/*
 * MPI check of a libfabric provider, run by scripts/fabric-smoke.sh with two
 * ranks in two network namespaces (pml cm + mtl ofi restricted to the provider
 * under test).
 *
 *  1. where each rank runs: host name, network namespace inode, addresses;
 *  2. ping-pong between ranks 0 and 1 at 8 B, 64 KiB and 4 MiB: verified
 *     round trips first (every byte of both directions checked against a
 *     pattern that differs per size, round trip and direction), then timed
 *     batches; prints the median over batches of the half round trip (µs)
 *     and the bandwidth it implies (MB/s, Gb/s);
 *  3. MPI_Allreduce (MPI_SUM over ints, every element checked on every rank);
 *  4. one-sided (also alone with --onesided-only): MPI_Put and MPI_Get on a
 *     window over malloc'd memory, in fence epochs and in passive-target
 *     (lock/unlock) epochs, verified at origin and target.
 *
 * --quick runs fewer timed batches (for the smoke script's default run).
 *
 * Every result line starts with a keyword the script greps for; any failed
 * check prints "FAIL ..." and ends the job with MPI_Abort (non-zero exit).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/stat.h>

static int rank, nranks;

static void fail(const char *what)
{
	fprintf(stderr, "FAIL rank %d: %s\n", rank, what);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static void check_mpi(int rc, const char *what)
{
	if (rc != MPI_SUCCESS) {
		char msg[MPI_MAX_ERROR_STRING + 128];
		char err[MPI_MAX_ERROR_STRING];
		int len = 0;
		MPI_Error_string(rc, err, &len);
		snprintf(msg, sizeof(msg), "%s: %s", what, err);
		fail(msg);
	}
}

/* A byte pattern no two (seed, offset) pairs of one run share by accident:
 * a 64-bit mix of the seed and the offset, one byte per offset. */
static uint8_t pattern_byte(uint64_t seed, size_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i * 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 31;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 29;
	return (uint8_t)x;
}

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern_byte(seed, i);
}

/* Returns the first offset that differs from the pattern, or len. */
static size_t verify(const uint8_t *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern_byte(seed, i))
			return i;
	return len;
}

static void print_location(void)
{
	char host[256] = "?";
	char ns[64] = "?";
	char addrs[512] = "";
	struct stat st;
	struct ifaddrs *ifa, *p;

	gethostname(host, sizeof(host) - 1);
	if (stat("/proc/self/ns/net", &st) == 0)
		snprintf(ns, sizeof(ns), "%lu", (unsigned long)st.st_ino);
	if (getifaddrs(&ifa) == 0) {
		for (p = ifa; p; p = p->ifa_next) {
			char a[INET_ADDRSTRLEN];
			if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET)
				continue;
			inet_ntop(AF_INET, &((struct sockaddr_in *)p->ifa_addr)->sin_addr, a, sizeof(a));
			if (strlen(addrs) + strlen(a) + 2 < sizeof(addrs)) {
				strcat(addrs, " ");
				strcat(addrs, a);
			}
		}
		freeifaddrs(ifa);
	}
	printf("location rank=%d host=%s netns=%s addrs=%s\n", rank, host, ns, addrs);
	fflush(stdout);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void pingpong(size_t len, int verified_trips, int batches, int trips_per_batch)
{
	uint8_t *buf = malloc(len);
	double *half_rtt_us = calloc((size_t)batches, sizeof(double));
	int peer = rank == 0 ? 1 : 0;
	char what[128];

	if (!buf || !half_rtt_us)
		fail("out of memory");

	/* Verified round trips: rank 0 sends pattern (len, t, 0), rank 1 checks
	 * it and answers with pattern (len, t, 1), which rank 0 checks. */
	for (int t = 0; t < verified_trips; t++) {
		uint64_t ping = ((uint64_t)len << 20) ^ ((uint64_t)t << 1);
		uint64_t pong = ping | 1;
		size_t bad;
		if (rank == 0) {
			fill(buf, len, ping);
			check_mpi(MPI_Send(buf, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD), "MPI_Send");
			memset(buf, 0, len);
			check_mpi(MPI_Recv(buf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
					   MPI_STATUS_IGNORE), "MPI_Recv");
			bad = verify(buf, len, pong);
		} else {
			memset(buf, 0, len);
			check_mpi(MPI_Recv(buf, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD,
					   MPI_STATUS_IGNORE), "MPI_Recv");
			bad = verify(buf, len, ping);
			fill(buf, len, pong);
			check_mpi(MPI_Send(buf, (int)len, MPI_BYTE, peer, 2, MPI_COMM_WORLD), "MPI_Send");
		}
		if (bad != len) {
			snprintf(what, sizeof(what), "ping-pong of %zu B, round trip %d: byte %zu differs",
				 len, t, bad);
			fail(what);
		}
	}

	for (int b = 0; b < batches; b++) {
		double t0;
		check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
		t0 = MPI_Wtime();
		for (int t = 0; t < trips_per_batch; t++) {
			if (rank == 0) {
				MPI_Send(buf, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
				MPI_Recv(buf, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(buf, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(buf, (int)len, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
			}
		}
		half_rtt_us[b] = (MPI_Wtime() - t0) * 1e6 / trips_per_batch / 2.0;
	}

	if (rank == 0) {
		double med;
		qsort(half_rtt_us, (size_t)batches, sizeof(double), cmp_double);
		med = half_rtt_us[batches / 2];
		printf("pingpong size=%zu half_rtt_us=%.2f MBps=%.1f Gbps=%.3f "
		       "(median of %d batches x %d round trips; %d round trips verified)\n",
		       len, med, (double)len / med, (double)len * 8.0 / med / 1e3, batches,
		       trips_per_batch, verified_trips);
		fflush(stdout);
	}
	free(half_rtt_us);
	free(buf);
}

static void allreduce(int count)
{
	int *in = malloc(sizeof(int) * (size_t)count);
	int *out = malloc(sizeof(int) * (size_t)count);
	int bad = 0, any_bad = 0;

	if (!in || !out)
		fail("out of memory");
	for (int i = 0; i < count; i++)
		in[i] = (rank + 1) * 1000 + i;
	check_mpi(MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
	/* sum over r of ((r + 1) * 1000 + i) */
	for (int i = 0; i < count; i++)
		if (out[i] != 1000 * nranks * (nranks + 1) / 2 + nranks * i)
			bad++;
	check_mpi(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
	if (any_bad)
		fail("MPI_Allreduce: wrong sums");
	if (rank == 0) {
		printf("allreduce ok count=%d op=MPI_SUM ranks=%d (every element checked on every rank)\n",
		       count, nranks);
		fflush(stdout);
	}
	free(in);
	free(out);
}

/*
 * Window of 2 * len bytes on every rank (malloc'd, MPI_Win_create). Rank 1's
 * first half is the Put target, its second half the Get source.
 */
static void onesided(size_t len)
{
	size_t wlen = 2 * len;
	uint8_t *win_mem = malloc(wlen);
	uint8_t *local = malloc(len);
	MPI_Win win;
	size_t bad;
	char what[160];
	uint64_t put_seed = 0x5075740000000001ULL, get_seed = 0x4765740000000002ULL;
	uint64_t lock_seed = 0x4c6f636b00000003ULL;

	if (!win_mem || !local)
		fail("out of memory");
	memset(win_mem, 0, wlen);
	if (rank == 1)
		fill(win_mem + len, len, get_seed);

	check_mpi(MPI_Win_create(win_mem, (MPI_Aint)wlen, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win),
		  "MPI_Win_create");

	/* Fence epoch 1: Put from rank 0 into rank 1's first half, Get of rank
	 * 1's second half into rank 0's local buffer. */
	check_mpi(MPI_Win_fence(0, win), "MPI_Win_fence");
	if (rank == 0) {
		fill(local, len, put_seed);
		check_mpi(MPI_Put(local, (int)len, MPI_BYTE, 1, 0, (int)len, MPI_BYTE, win), "MPI_Put");
	}
	check_mpi(MPI_Win_fence(0, win), "MPI_Win_fence");
	if (rank == 1 && (bad = verify(win_mem, len, put_seed)) != len) {
		snprintf(what, sizeof(what), "MPI_Put of %zu B (fence): byte %zu differs", len, bad);
		fail(what);
	}
	if (rank == 0) {
		memset(local, 0, len);
		check_mpi(MPI_Get(local, (int)len, MPI_BYTE, 1, (MPI_Aint)len, (int)len, MPI_BYTE, win),
			  "MPI_Get");
	}
	check_mpi(MPI_Win_fence(0, win), "MPI_Win_fence");
	if (rank == 0 && (bad = verify(local, len, get_seed)) != len) {
		snprintf(what, sizeof(what), "MPI_Get of %zu B (fence): byte %zu differs", len, bad);
		fail(what);
	}

	/* Passive target: rank 0 locks rank 1's window, Puts a new pattern,
	 * Gets it back in a second epoch, unlocks; rank 1 checks after a barrier. */
	if (rank == 0) {
		fill(local, len, lock_seed);
		check_mpi(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win), "MPI_Win_lock");
		check_mpi(MPI_Put(local, (int)len, MPI_BYTE, 1, 0, (int)len, MPI_BYTE, win), "MPI_Put");
		check_mpi(MPI_Win_unlock(1, win), "MPI_Win_unlock");
		memset(local, 0, len);
		check_mpi(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win), "MPI_Win_lock");
		check_mpi(MPI_Get(local, (int)len, MPI_BYTE, 1, 0, (int)len, MPI_BYTE, win), "MPI_Get");
		check_mpi(MPI_Win_unlock(1, win), "MPI_Win_unlock");
		if ((bad = verify(local, len, lock_seed)) != len) {
			snprintf(what, sizeof(what), "MPI_Get after MPI_Put of %zu B (lock): byte %zu differs",
				 len, bad);
			fail(what);
		}
	}
	check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
	if (rank == 1) {
		/* The target's view of its own memory after the passive epoch. */
		check_mpi(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win), "MPI_Win_lock");
		bad = verify(win_mem, len, lock_seed);
		check_mpi(MPI_Win_unlock(1, win), "MPI_Win_unlock");
		if (bad != len) {
			snprintf(what, sizeof(what), "MPI_Put of %zu B (lock): byte %zu differs at the target",
				 len, bad);
			fail(what);
		}
	}
	check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

	if (rank == 0) {
		printf("onesided ok size=%zu MPI_Put+MPI_Get verified in fence and lock epochs\n", len);
		fflush(stdout);
	}
	check_mpi(MPI_Win_free(&win), "MPI_Win_free");
	free(win_mem);
	free(local);
}

int main(int argc, char **argv)
{
	int quick = 0, onesided_only = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0)
			quick = 1;
		else if (strcmp(argv[i], "--onesided-only") == 0)
			onesided_only = 1;
	}

	MPI_Init(&argc, &argv);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2)
		fail("runs with exactly 2 ranks (mpirun -np 2)");

	print_location();
	check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

	if (onesided_only) {
		onesided(1 << 20);
		MPI_Finalize();
		return 0;
	}
	pingpong(8, 16, quick ? 5 : 11, quick ? 100 : 1000);
	pingpong(64 << 10, 8, quick ? 5 : 11, quick ? 10 : 100);
	pingpong(4 << 20, 4, quick ? 3 : 5, quick ? 2 : 10);
	check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

	allreduce(1 << 16);
	onesided(1 << 20);

	if (rank == 0) {
		printf("mpi_check passed\n");
		fflush(stdout);
	}
	MPI_Finalize();
	return 0;
}
