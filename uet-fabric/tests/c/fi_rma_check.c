/*
 * fi_rma_check: RMA through a libfabric provider, verified by hash.
 *
 *   fi_rma_check [-p PROV] --listen IP [--port N] [--region BYTES]
 *       target: registers a malloc'd region (plus a stack buffer and an
 *       mmap'd buffer as small regions), hands its endpoint name and keys to
 *       the initiator over a TCP control connection, counts and checks the
 *       remote CQ data of fi_writedata, and hashes what landed on request.
 *   fi_rma_check [-p PROV] --connect IP [--port N] [--total BYTES]
 *       initiator: fi_write, then fi_writedata, then fi_read at 4 KiB,
 *       64 KiB, 1 MiB and 16 MiB messages, TOTAL bytes written in all
 *       (default 1 GiB) over passes across the target's region; every pass
 *       is verified: the target's hash of its region equals the hash of what
 *       was sent, and what fi_read brings back equals what was written.
 *   fi_rma_check [-p PROV] --url uet://FEP/JOB/PID/RI/GEN/0xKEY [--len BYTES]
 *       writes LEN bytes into a region `uet serve` exposes (the endpoint
 *       name and key come from the URL), the last write an fi_writedata whose
 *       data asks the target to hash what it got; reads it back and compares;
 *       prints the XXH3-64 for comparison with the one `uet serve` prints.
 *   fi_rma_check [-p PROV] --serve [--size BYTES]
 *       registers a malloc'd region, prints its uet:// URL (for `uet write`
 *       through a uetd), waits for the fi_writedata that asks for a hash
 *       (data 0x5645 << 48 | bytes) and prints the XXH3-64 of those bytes.
 *
 * Every libfabric call's return value is checked; failures print the call,
 * the error code and fi_strerror, and the program exits non-zero.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <xxhash.h>

#define CTL_PORT 47600
#define MAX_NAME 256
#define WINDOW 64
#define STACK_MR_LEN 4096
#define MMAP_MR_LEN (1u << 20)
/* uetd's `uet serve` hashes the first N bytes of its region when a write's
 * immediate data is VERIFY_TAG | N (uetd/src/daemon.rs). */
#define VERIFY_TAG (UINT64_C(0x5645) << 48)
#define UET_PORT 4793

#define DIE(...)                                                                                   \
	do {                                                                                       \
		fprintf(stderr, "fi_rma_check: " __VA_ARGS__);                                   \
		fputc('\n', stderr);                                                               \
		exit(1);                                                                           \
	} while (0)

/* fi_av_insert of one name: returns 1 on success, else an error or 0. */
#define AV_INSERT_ONE(av, name, addr, what)                                                        \
	do {                                                                                       \
		int rc_ = fi_av_insert((av), (name), 1, (addr), 0, NULL);                          \
		if (rc_ != 1)                                                                      \
			DIE("fi_av_insert of %s = %d (%s)", (what), rc_,                           \
			    rc_ < 0 ? fi_strerror(-rc_) : "address not inserted");                 \
	} while (0)

#define FI_CHECK(call)                                                                             \
	do {                                                                                       \
		ssize_t rc_ = (call);                                                              \
		if (rc_ != 0)                                                                      \
			DIE("%s:%d: %s = %zd (%s)", __FILE__, __LINE__, #call, rc_,                \
			    fi_strerror((int)-rc_));                                               \
	} while (0)

/* ---- libfabric objects ---------------------------------------------------- */

struct fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	bool virt_addr; /* remote addresses are virtual addresses, not offsets */
	bool local_mr;  /* local buffers need registration (FI_MR_LOCAL) */
	bool rx_cq_data; /* remote CQ data consumes a posted receive */
	size_t window;
};

/* Operation contexts (FI_CONTEXT mode: the provider owns one until its
 * completion), handed out from a free list and returned by completions. */
struct ctx_pool {
	struct fi_context ctx[WINDOW];
	struct fi_context *free[WINDOW];
	size_t nfree;
};

static void pool_init(struct ctx_pool *p)
{
	for (size_t i = 0; i < WINDOW; i++)
		p->free[i] = &p->ctx[i];
	p->nfree = WINDOW;
}

static struct fi_context *pool_get(struct ctx_pool *p)
{
	return p->nfree ? p->free[--p->nfree] : NULL;
}

static void pool_put(struct ctx_pool *p, void *ctx)
{
	struct fi_context *c = ctx;
	if (c < p->ctx || c >= p->ctx + WINDOW || p->nfree == WINDOW)
		DIE("a completion returned an operation context this program did not give");
	p->free[p->nfree++] = c;
}

static struct ctx_pool tx_pool; /* initiator operations */
static struct ctx_pool rx_pool; /* receives for FI_RX_CQ_DATA */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fab_open(struct fab *f, const char *prov, const char *node, uint64_t flags)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr av_attr = {.type = FI_AV_UNSPEC};
	int rc;

	if (!hints)
		DIE("fi_allocinfo failed");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_RMA | FI_MSG;
	hints->mode = FI_CONTEXT | FI_RX_CQ_DATA;
	/* What this program handles: keys chosen by the provider, offsets or
	 * virtual addresses, registered local buffers, allocated memory only. */
	hints->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_LOCAL;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	if (prov && *prov)
		hints->fabric_attr->prov_name = strdup(prov);

	/* An initiator's completion must mean the data is in the target's
	 * memory before it asks the target for a hash: delivery complete. */
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	rc = fi_getinfo(FI_VERSION(1, 17), node, NULL, flags, hints, &f->info);
	if (rc == -FI_ENODATA) {
		hints->tx_attr->op_flags = 0;
		rc = fi_getinfo(FI_VERSION(1, 17), node, NULL, flags, hints, &f->info);
		if (!rc)
			printf("warning: no FI_DELIVERY_COMPLETE; completions are the provider's "
			       "default (0x%" PRIx64 "), a hash may be asked for before the data "
			       "landed\n", f->info->tx_attr->op_flags);
	}
	if (rc)
		DIE("fi_getinfo(provider %s, RDM, FI_RMA|FI_MSG) = %d (%s)", prov ? prov : "any", rc,
		    fi_strerror(-rc));
	fi_freeinfo(hints);

	f->virt_addr = f->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR;
	f->local_mr = f->info->domain_attr->mr_mode & FI_MR_LOCAL;
	f->rx_cq_data = f->info->mode & FI_RX_CQ_DATA;
	f->window = f->info->tx_attr->size < WINDOW ? f->info->tx_attr->size : WINDOW;
	if (f->window == 0)
		f->window = 1;
	printf("provider %s fabric %s domain %s: mr_mode%s%s%s%s, cq_data_size %zu, "
	       "max_msg_size %zu, tx size %zu, window %zu\n",
	       f->info->fabric_attr->prov_name, f->info->fabric_attr->name,
	       f->info->domain_attr->name, f->virt_addr ? " VIRT_ADDR" : "",
	       f->local_mr ? " LOCAL" : "",
	       (f->info->domain_attr->mr_mode & FI_MR_PROV_KEY) ? " PROV_KEY" : "",
	       f->rx_cq_data ? ", FI_RX_CQ_DATA" : "", f->info->domain_attr->cq_data_size,
	       f->info->ep_attr->max_msg_size, f->info->tx_attr->size, f->window);

	FI_CHECK(fi_fabric(f->info->fabric_attr, &f->fabric, NULL));
	FI_CHECK(fi_domain(f->fabric, f->info, &f->domain, NULL));
	cq_attr.size = 4096;
	FI_CHECK(fi_cq_open(f->domain, &cq_attr, &f->cq, NULL));
	FI_CHECK(fi_av_open(f->domain, &av_attr, &f->av, NULL));
	FI_CHECK(fi_endpoint(f->domain, f->info, &f->ep, NULL));
	FI_CHECK(fi_ep_bind(f->ep, &f->av->fid, 0));
	FI_CHECK(fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV));
	FI_CHECK(fi_enable(f->ep));
	pool_init(&tx_pool);
	pool_init(&rx_pool);
}

static void fab_close(struct fab *f)
{
	FI_CHECK(fi_close(&f->ep->fid));
	FI_CHECK(fi_close(&f->av->fid));
	FI_CHECK(fi_close(&f->cq->fid));
	FI_CHECK(fi_close(&f->domain->fid));
	FI_CHECK(fi_close(&f->fabric->fid));
	fi_freeinfo(f->info);
}

static struct fid_mr *mr_reg(struct fab *f, void *buf, size_t len, uint64_t access)
{
	static uint64_t next_key = 1;
	struct fid_mr *mr;
	/* Without FI_MR_PROV_KEY the application picks the keys: unique ones. */
	uint64_t key = (f->info->domain_attr->mr_mode & FI_MR_PROV_KEY) ? 0 : next_key++;
	FI_CHECK(fi_mr_reg(f->domain, buf, len, access, 0, key, 0, &mr, NULL));
	if (f->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		FI_CHECK(fi_mr_bind(mr, &f->ep->fid, 0));
		FI_CHECK(fi_mr_enable(mr));
	}
	return mr;
}

static void print_cq_error(struct fab *f, const char *what)
{
	struct fi_cq_err_entry err = {0};
	ssize_t rc = fi_cq_readerr(f->cq, &err, 0);
	if (rc < 0)
		DIE("%s: fi_cq_readerr = %zd (%s)", what, rc, fi_strerror((int)-rc));
	DIE("%s: completion error %d (%s), provider errno %d (%s)", what, err.err,
	    fi_strerror(err.err), err.prov_errno,
	    fi_cq_strerror(f->cq, err.prov_errno, err.err_data, NULL, 0));
}

/* Reads up to n completions; returns how many. Errors end the program. */
static size_t cq_poll(struct fab *f, struct fi_cq_data_entry *e, size_t n, const char *what)
{
	ssize_t rc = fi_cq_read(f->cq, e, n);
	if (rc == -FI_EAGAIN)
		return 0;
	if (rc == -FI_EAVAIL)
		print_cq_error(f, what);
	if (rc < 0)
		DIE("%s: fi_cq_read = %zd (%s)", what, rc, fi_strerror((int)-rc));
	return (size_t)rc;
}

/* ---- hashing and patterns --------------------------------------------------- */

static void fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
	for (; i < len; i++)
		buf[i] = (uint8_t)(seed + i);
}

static uint64_t hash(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len);
}

/* ---- control connection ------------------------------------------------------- */

enum ctl_op { CTL_HASH = 1, CTL_EXPECT_DATA, CTL_DATA_RESULT, CTL_DONE };
enum region_id { REGION_MAIN, REGION_STACK, REGION_MMAP, NREGIONS };

struct ctl_msg {
	uint32_t op;
	uint32_t region;
	uint64_t a, b;
};

struct region_desc {
	uint64_t addr; /* remote address of byte 0: VA or 0 */
	uint64_t key;
	uint64_t len;
};

struct hello {
	uint32_t name_len;
	uint8_t name[MAX_NAME];
	struct region_desc regions[NREGIONS];
};

static void xwrite(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			DIE("control connection: write: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static void xread(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			DIE("control connection closed by the peer");
		if (n < 0)
			DIE("control connection: read: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static int ctl_listen_accept(const char *ip, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, ls, fd;
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		DIE("bad IPv4 address %s", ip);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		DIE("socket: %s", strerror(errno));
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		DIE("control socket %s:%d: %s", ip, port, strerror(errno));
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		DIE("accept: %s", strerror(errno));
	close(ls);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static int ctl_connect(const char *ip, int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, fd;
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		DIE("bad IPv4 address %s", ip);
	/* The target may not listen yet: retry a refused connection for 10 s. */
	double deadline = now() + 10;
	for (;;) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0)
			DIE("socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		if (errno != ECONNREFUSED || now() > deadline)
			DIE("connecting the control socket to %s:%d: %s", ip, port, strerror(errno));
		close(fd);
		usleep(20000);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* ---- target ------------------------------------------------------------------------ */

/* Remote CQ data expected during one fi_writedata pass: every value
 * base + i, i < n, exactly once. */
struct data_check {
	uint64_t base, n, seen, bad, dup;
	uint8_t *bitmap;
};

/* Receives posted for providers that need one per remote CQ data
 * (FI_RX_CQ_DATA). */
static void post_cq_data_recvs(struct fab *f)
{
	struct fi_context *ctx;
	while ((ctx = pool_get(&rx_pool)) != NULL) {
		ssize_t rc = fi_recv(f->ep, NULL, 0, NULL, FI_ADDR_UNSPEC, ctx);
		if (rc == -FI_EAGAIN) {
			pool_put(&rx_pool, ctx);
			return;
		}
		if (rc)
			DIE("fi_recv = %zd (%s)", rc, fi_strerror((int)-rc));
	}
}

/* A target-side completion: checks remote CQ data against dc, or, when
 * verify_bytes is given, takes the VERIFY_TAG request of `uet write`. */
static void target_completion(const struct fi_cq_data_entry *e, struct data_check *dc,
			      uint64_t *verify_bytes)
{
	struct fi_context *c = e->op_context;
	if (c >= rx_pool.ctx && c < rx_pool.ctx + WINDOW)
		pool_put(&rx_pool, c);
	if (!(e->flags & FI_REMOTE_CQ_DATA))
		return;
	if (verify_bytes && (e->data & ~((UINT64_C(1) << 48) - 1)) == VERIFY_TAG) {
		*verify_bytes = e->data & ((UINT64_C(1) << 48) - 1);
		return;
	}
	if (!dc->bitmap || e->data < dc->base || e->data - dc->base >= dc->n) {
		dc->bad++;
		return;
	}
	uint64_t i = e->data - dc->base;
	if (dc->bitmap[i / 8] & (1u << (i % 8))) {
		dc->dup++;
	} else {
		dc->bitmap[i / 8] |= (uint8_t)(1u << (i % 8));
		dc->seen++;
	}
}

static void target_progress(struct fab *f, struct data_check *dc, uint64_t *verify_bytes,
			    size_t *got)
{
	struct fi_cq_data_entry e[16];
	size_t n = cq_poll(f, e, 16, "target");
	for (size_t i = 0; i < n; i++)
		target_completion(&e[i], dc, verify_bytes);
	if (f->rx_cq_data && n)
		post_cq_data_recvs(f);
	if (got)
		*got = n;
}

static int run_target(const char *prov, const char *ip, int port, size_t region_len)
{
	struct fab f = {0};
	struct hello h = {0};
	size_t name_len = MAX_NAME;
	uint8_t stack_buf[STACK_MR_LEN] __attribute__((aligned(64)));
	uint8_t *main_buf, *mmap_buf;
	struct fid_mr *mr[NREGIONS];
	void *base[NREGIONS];
	size_t lens[NREGIONS] = {region_len, STACK_MR_LEN, MMAP_MR_LEN};
	uint64_t access = FI_REMOTE_WRITE | FI_REMOTE_READ;
	struct data_check dc = {0};
	int fd;

	fab_open(&f, prov, ip, FI_SOURCE);
	FI_CHECK(fi_getname(&f.ep->fid, h.name, &name_len));
	h.name_len = (uint32_t)name_len;

	main_buf = malloc(region_len);
	mmap_buf = mmap(NULL, MMAP_MR_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!main_buf || mmap_buf == MAP_FAILED)
		DIE("out of memory");
	memset(main_buf, 0, region_len);
	memset(stack_buf, 0, sizeof(stack_buf));
	memset(mmap_buf, 0, MMAP_MR_LEN);
	base[REGION_MAIN] = main_buf;
	base[REGION_STACK] = stack_buf;
	base[REGION_MMAP] = mmap_buf;
	for (int r = 0; r < NREGIONS; r++) {
		mr[r] = mr_reg(&f, base[r], lens[r], access);
		h.regions[r].key = fi_mr_key(mr[r]);
		h.regions[r].addr = f.virt_addr ? (uint64_t)(uintptr_t)base[r] : 0;
		h.regions[r].len = lens[r];
	}
	printf("target: malloc region %zu B key 0x%" PRIx64 ", stack %u B key 0x%" PRIx64
	       ", mmap %u B key 0x%" PRIx64 "; control port %s:%d\n",
	       region_len, h.regions[0].key, STACK_MR_LEN, h.regions[1].key, MMAP_MR_LEN,
	       h.regions[2].key, ip, port);
	fflush(stdout);

	fd = ctl_listen_accept(ip, port);
	xwrite(fd, &h, sizeof(h));
	{
		struct hello peer;
		fi_addr_t a;
		xread(fd, &peer, sizeof(peer));
		if (peer.name_len > MAX_NAME)
			DIE("bad peer name length");
		AV_INSERT_ONE(f.av, peer.name, &a, "the initiator's name");
	}
	if (f.rx_cq_data)
		post_cq_data_recvs(&f);

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		struct ctl_msg m, reply = {0};
		size_t got;
		/* Manual-progress providers move data only while we poll the CQ. */
		target_progress(&f, &dc, NULL, &got);
		if (poll(&p, 1, got ? 0 : 1) <= 0)
			continue;
		xread(fd, &m, sizeof(m));
		if (m.op == CTL_DONE)
			break;
		if (m.op == CTL_HASH) {
			if (m.region >= NREGIONS || m.a > lens[m.region] || m.b > lens[m.region] - m.a)
				DIE("bad hash request");
			reply.a = hash((uint8_t *)base[m.region] + m.a, m.b);
		} else if (m.op == CTL_EXPECT_DATA) {
			free(dc.bitmap);
			dc = (struct data_check){.base = m.a, .n = m.b};
			dc.bitmap = calloc(m.b / 8 + 1, 1);
			if (!dc.bitmap)
				DIE("out of memory");
		} else if (m.op == CTL_DATA_RESULT) {
			/* The initiator has all its completions: the remote CQ data
			 * is due; wait for it (bounded). */
			double deadline = now() + 30;
			while (dc.seen < dc.n && now() < deadline)
				target_progress(&f, &dc, NULL, NULL);
			reply.a = dc.seen;
			reply.b = dc.bad + dc.dup;
			printf("target: remote CQ data: %" PRIu64 " of %" PRIu64 " values seen once, "
			       "%" PRIu64 " unexpected, %" PRIu64 " duplicate\n",
			       dc.seen, dc.n, dc.bad, dc.dup);
			free(dc.bitmap);
			dc = (struct data_check){0};
		} else {
			DIE("bad control message %u", m.op);
		}
		xwrite(fd, &reply, sizeof(reply));
	}
	close(fd);
	for (int r = 0; r < NREGIONS; r++)
		FI_CHECK(fi_close(&mr[r]->fid));
	fab_close(&f);
	munmap(mmap_buf, MMAP_MR_LEN);
	free(main_buf);
	printf("target done\n");
	return 0;
}

/* ---- initiator --------------------------------------------------------------------- */

enum rma_op { OP_WRITE, OP_WRITEDATA, OP_READ };
static const char *op_name[] = {"fi_write", "fi_writedata", "fi_read"};


/*
 * Moves len bytes between local buf and the remote region [raddr, raddr+len)
 * in msg-byte operations, up to the window in flight. For fi_writedata the
 * k-th message carries data_base + k, or, for the last one, last_data when
 * it is non-zero. Returns the number of operations.
 */
static uint64_t rma(struct fab *f, enum rma_op op, fi_addr_t dest, uint8_t *buf, void *desc,
		    uint64_t raddr, uint64_t key, size_t len, size_t msg, uint64_t data_base,
		    uint64_t last_data)
{
	uint64_t ops = (len + msg - 1) / msg, posted = 0, done = 0;
	double deadline = now() + 120;
	while (done < ops) {
		while (posted < ops && posted - done < f->window) {
			size_t off = (size_t)posted * msg;
			size_t n = len - off < msg ? len - off : msg;
			struct fi_context *ctx = pool_get(&tx_pool);
			uint64_t data = (last_data && posted == ops - 1) ? last_data : data_base + posted;
			ssize_t rc;
			switch (op) {
			case OP_WRITE:
				rc = fi_write(f->ep, buf + off, n, desc, dest, raddr + off, key, ctx);
				break;
			case OP_WRITEDATA:
				rc = fi_writedata(f->ep, buf + off, n, desc, data, dest, raddr + off, key,
						  ctx);
				break;
			default:
				rc = fi_read(f->ep, buf + off, n, desc, dest, raddr + off, key, ctx);
				break;
			}
			if (rc == -FI_EAGAIN) {
				pool_put(&tx_pool, ctx);
				break;
			}
			if (rc)
				DIE("%s(%zu B at +%zu) = %zd (%s)", op_name[op], n, off, rc,
				    fi_strerror((int)-rc));
			posted++;
		}
		struct fi_cq_data_entry e[16];
		size_t n = cq_poll(f, e, 16, op_name[op]);
		for (size_t i = 0; i < n; i++)
			pool_put(&tx_pool, e[i].op_context);
		done += n;
		if (now() > deadline)
			DIE("%s: %" PRIu64 " of %" PRIu64 " operations completed in 120 s",
			    op_name[op], done, ops);
	}
	return ops;
}

static void ctl_call(int fd, uint32_t op, uint32_t region, uint64_t a, uint64_t b,
		     struct ctl_msg *reply)
{
	struct ctl_msg m = {.op = op, .region = region, .a = a, .b = b};
	xwrite(fd, &m, sizeof(m));
	xread(fd, reply, sizeof(*reply));
}

static int run_initiator(const char *prov, const char *ip, int port, uint64_t total)
{
	static const size_t sizes[] = {4096, 64 << 10, 1 << 20, 16 << 20};
	const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
	struct fab f = {0};
	struct hello me = {0}, peer;
	size_t name_len = MAX_NAME;
	fi_addr_t dest;
	struct fid_mr *src_mr = NULL, *back_mr = NULL;
	void *src_desc = NULL, *back_desc = NULL;
	uint8_t *src, *back;
	size_t region_len;
	uint64_t written = 0, read_bytes = 0, pass = 0;
	double t_all = now(), t_rma = 0;
	int fd;

	fab_open(&f, prov, ip, 0);
	FI_CHECK(fi_getname(&f.ep->fid, me.name, &name_len));
	me.name_len = (uint32_t)name_len;
	fd = ctl_connect(ip, port);
	xread(fd, &peer, sizeof(peer));
	xwrite(fd, &me, sizeof(me));
	if (peer.name_len > MAX_NAME)
		DIE("bad target name length");
	AV_INSERT_ONE(f.av, peer.name, &dest, "the target's name");
	region_len = peer.regions[REGION_MAIN].len;
	if (region_len < sizes[nsizes - 1])
		DIE("the target's region (%zu B) is smaller than the largest message", region_len);

	src = malloc(region_len);
	back = malloc(region_len);
	if (!src || !back)
		DIE("out of memory");
	if (f.local_mr) {
		src_mr = mr_reg(&f, src, region_len, FI_WRITE | FI_READ);
		back_mr = mr_reg(&f, back, region_len, FI_READ | FI_WRITE);
		src_desc = fi_mr_desc(src_mr);
		back_desc = fi_mr_desc(back_mr);
	}

	/* Passes over the whole region: for every size fi_write and
	 * fi_writedata, until `total` bytes are written; each followed by a
	 * hash check; fi_read of the last pass of each size. */
	uint64_t passes_per_size = total / region_len / (2 * nsizes);
	if (passes_per_size == 0)
		passes_per_size = 1;
	for (size_t s = 0; s < nsizes; s++) {
		size_t msg = sizes[s];
		if (msg > f.info->ep_attr->max_msg_size)
			DIE("%zu B messages exceed the provider's max_msg_size %zu", msg,
			    f.info->ep_attr->max_msg_size);
		for (uint64_t p = 0; p < passes_per_size; p++) {
			for (int op = OP_WRITE; op <= OP_WRITEDATA; op++) {
				struct ctl_msg r;
				uint64_t data_base = 0, ops;
				double t0, dt;
				pass++;
				fill(src, region_len, pass);
				if (op == OP_WRITEDATA) {
					if (f.info->domain_attr->cq_data_size < 4)
						DIE("the provider has no remote CQ data (cq_data_size %zu)",
						    f.info->domain_attr->cq_data_size);
					data_base = (pass & 0xff) << 24;
					ctl_call(fd, CTL_EXPECT_DATA, 0, data_base,
						 (region_len + msg - 1) / msg, &r);
				}
				t0 = now();
				ops = rma(&f, op, dest, src, src_desc, peer.regions[0].addr,
					  peer.regions[0].key, region_len, msg, data_base, 0);
				dt = now() - t0;
				t_rma += dt;
				written += region_len;
				if (op == OP_WRITEDATA) {
					ctl_call(fd, CTL_DATA_RESULT, 0, 0, 0, &r);
					if (r.a != ops || r.b)
						DIE("fi_writedata %zu B: the target saw %" PRIu64 " of %" PRIu64
						    " remote CQ data values (+%" PRIu64 " wrong)",
						    msg, r.a, ops, r.b);
				}
				ctl_call(fd, CTL_HASH, REGION_MAIN, 0, region_len, &r);
				if (r.a != hash(src, region_len))
					DIE("%s %zu B: the target's hash %016" PRIx64
					    " differs from the data's %016" PRIx64,
					    op_name[op], msg, r.a, hash(src, region_len));
				printf("%-12s msg %8zu B: %" PRIu64 " ops, %zu B in %.3f s, %.3f Gb/s, "
				       "target hash %016" PRIx64 " ok%s\n",
				       op_name[op], msg, ops, region_len, dt, region_len * 8 / dt / 1e9, r.a,
				       op == OP_WRITEDATA ? ", remote CQ data all seen once" : "");
				fflush(stdout);
			}
		}
		/* Read back what the last pass wrote. */
		{
			double t0 = now(), dt;
			uint64_t ops;
			memset(back, 0, region_len);
			ops = rma(&f, OP_READ, dest, back, back_desc, peer.regions[0].addr,
				  peer.regions[0].key, region_len, msg, 0, 0);
			dt = now() - t0;
			read_bytes += region_len;
			if (memcmp(back, src, region_len))
				DIE("fi_read %zu B: what came back differs from what was written", msg);
			printf("%-12s msg %8zu B: %" PRIu64 " ops, %zu B in %.3f s, %.3f Gb/s, "
			       "equal to what was written\n",
			       "fi_read", msg, ops, region_len, dt, region_len * 8 / dt / 1e9);
			fflush(stdout);
		}
	}

	/* The small regions: a stack buffer and an mmap'd one on the target. */
	for (int r = REGION_STACK; r <= REGION_MMAP; r++) {
		struct ctl_msg rep;
		size_t len = peer.regions[r].len, msg = len < 65536 ? len : 65536;
		const char *what = r == REGION_STACK ? "stack" : "mmap";
		pass++;
		fill(src, len, pass);
		rma(&f, OP_WRITE, dest, src, src_desc, peer.regions[r].addr, peer.regions[r].key, len,
		    msg, 0, 0);
		ctl_call(fd, CTL_HASH, (uint32_t)r, 0, len, &rep);
		if (rep.a != hash(src, len))
			DIE("fi_write into the target's %s buffer: hash differs", what);
		memset(back, 0, len);
		rma(&f, OP_READ, dest, back, back_desc, peer.regions[r].addr, peer.regions[r].key, len,
		    msg, 0, 0);
		if (memcmp(back, src, len))
			DIE("fi_read of the target's %s buffer differs from what was written", what);
		printf("%-12s %zu B into the target's %s buffer: hash ok, read back equal\n",
		       "fi_write", len, what);
		written += len;
		read_bytes += len;
	}

	{
		struct ctl_msg m = {.op = CTL_DONE};
		xwrite(fd, &m, sizeof(m));
	}
	close(fd);
	if (src_mr)
		FI_CHECK(fi_close(&src_mr->fid));
	if (back_mr)
		FI_CHECK(fi_close(&back_mr->fid));
	fab_close(&f);
	free(src);
	free(back);
	printf("total written %" PRIu64 " B (%.2f GiB) in %" PRIu64 " passes, read %" PRIu64
	       " B; RMA time %.2f s (%.3f Gb/s written), wall %.2f s\n",
	       written, written / 1073741824.0, pass, read_bytes, t_rma, written * 8 / t_rma / 1e9,
	       now() - t_all);
	printf("fi_rma_check passed\n");
	return 0;
}

/* ---- uet:// regions ------------------------------------------------------------------ */

struct uet_url {
	struct in_addr fep;
	uint32_t job, pid, ri, gen;
	uint64_t key;
};

/* uet://FEP/JOB/PID/RI/GEN/0xKEY (IPv4 FEP). */
static void parse_url(const char *url, struct uet_url *u)
{
	char ip[64];
	unsigned job, pid, ri, gen;
	unsigned long long key;
	if (sscanf(url, "uet://%63[0-9.]/%u/%u/%u/%u/%llx", ip, &job, &pid, &ri, &gen, &key) != 6 ||
	    inet_pton(AF_INET, ip, &u->fep) != 1)
		DIE("bad URL %s (want uet://IPv4/JOB/PID/RI/GEN/0xKEY)", url);
	u->job = job;
	u->pid = pid;
	u->ri = ri;
	u->gen = gen;
	u->key = key;
	/* The provider takes RI and generation from the key's top 20 bits
	 * (RI << 52 | GEN << 44); a URL whose key says otherwise cannot be
	 * reached through fi_write's (address, key) alone. */
	if ((key >> 52) != ri || ((key >> 44) & 0xff) != gen)
		fprintf(stderr,
			"fi_rma_check: warning: URL %s: the key's resource index/generation "
			"(%llu/%llu) differ from the URL's %u/%u\n",
			url, key >> 52, (key >> 44) & 0xff, ri, gen);
}

/* The uet provider's 28-byte endpoint name (version, flags, UDP port,
 * pid_on_fep, reserved, job, FEP address as IPv4-mapped IPv6). */
static size_t uet_name(const struct uet_url *u, uint8_t out[28])
{
	uint16_t port = htons(UET_PORT), pid = htons((uint16_t)u->pid);
	uint32_t job = htonl(u->job);
	memset(out, 0, 28);
	out[0] = 1;
	memcpy(out + 2, &port, 2);
	memcpy(out + 4, &pid, 2);
	memcpy(out + 8, &job, 4);
	out[22] = 0xff;
	out[23] = 0xff;
	memcpy(out + 24, &u->fep, 4);
	return 28;
}

static int run_url(const char *prov, const char *url, size_t len, size_t msg, uint64_t seed)
{
	struct fab f = {0};
	struct uet_url u;
	uint8_t name[28];
	fi_addr_t dest;
	uint8_t *src = malloc(len), *back = malloc(len);
	struct fid_mr *mr = NULL, *bmr = NULL;
	void *desc = NULL, *bdesc = NULL;
	char ip[INET_ADDRSTRLEN];
	double t0, dt;

	parse_url(url, &u);
	inet_ntop(AF_INET, &u.fep, ip, sizeof(ip));
	if (!src || !back)
		DIE("out of memory");
	fab_open(&f, prov, ip, 0);
	if (f.info->domain_attr->cq_data_size < 8)
		DIE("the provider's remote CQ data is %zu bytes; the verify request needs 8",
		    f.info->domain_attr->cq_data_size);
	uet_name(&u, name);
	AV_INSERT_ONE(f.av, name, &dest, url);
	if (f.local_mr) {
		mr = mr_reg(&f, src, len, FI_WRITE);
		bmr = mr_reg(&f, back, len, FI_READ);
		desc = fi_mr_desc(mr);
		bdesc = fi_mr_desc(bmr);
	}
	fill(src, len, seed);
	t0 = now();
	/* Plain writes of all len bytes, read back and compared while the
	 * region is still served, then, as `uet write` does, the last chunk
	 * again as fi_writedata whose data asks `uet serve` to hash the first
	 * len bytes (`uet serve --count 1` ends on it and retires the region,
	 * so nothing may follow it). */
	rma(&f, OP_WRITE, dest, src, desc, 0, u.key, len, msg, 0, 0);
	dt = now() - t0;
	memset(back, 0, len);
	rma(&f, OP_READ, dest, back, bdesc, 0, u.key, len, msg, 0, 0);
	if (memcmp(back, src, len))
		DIE("fi_read of %s differs from what was written", url);
	{
		size_t last = len % msg ? len % msg : (len < msg ? len : msg);
		size_t off = len - last;
		rma(&f, OP_WRITEDATA, dest, src + off, desc, off, u.key, last, msg, 0,
		    VERIFY_TAG | len);
	}
	printf("wrote %zu B to %s in %zu B messages in %.3f s (%.3f Gb/s); read back equal\n", len,
	       url, msg, dt, len * 8 / dt / 1e9);
	printf("xxh3 %016" PRIx64 "\n", hash(src, len));
	if (mr)
		FI_CHECK(fi_close(&mr->fid));
	if (bmr)
		FI_CHECK(fi_close(&bmr->fid));
	fab_close(&f);
	free(src);
	free(back);
	return 0;
}

static int run_serve(const char *prov, size_t size, double timeout_s)
{
	struct fab f = {0};
	uint8_t name[MAX_NAME];
	size_t name_len = sizeof(name);
	uint8_t *buf = malloc(size);
	struct fid_mr *mr;
	uint64_t key, verify = UINT64_MAX;
	double deadline = now() + timeout_s;
	char ip[INET6_ADDRSTRLEN];
	uint16_t pid;
	uint32_t job;

	if (!buf)
		DIE("out of memory");
	memset(buf, 0, size);
	fab_open(&f, prov, NULL, 0);
	FI_CHECK(fi_getname(&f.ep->fid, name, &name_len));
	if (name_len != 28 || name[0] != 1)
		DIE("--serve needs the uet provider's 28-byte endpoint name (got %zu bytes)", name_len);
	mr = mr_reg(&f, buf, size, FI_REMOTE_WRITE | FI_REMOTE_READ);
	key = fi_mr_key(mr);
	memcpy(&pid, name + 4, 2);
	memcpy(&job, name + 8, 4);
	inet_ntop(AF_INET, name + 24, ip, sizeof(ip));
	printf("serving %zu B at uet://%s/%u/%u/%" PRIu64 "/%" PRIu64 "/0x%016" PRIx64 "\n", size, ip,
	       ntohl(job), ntohs(pid), key >> 52, (key >> 44) & 0xff, key);
	fflush(stdout);
	if (f.rx_cq_data)
		post_cq_data_recvs(&f);
	while (verify == UINT64_MAX) {
		struct data_check none = {0};
		target_progress(&f, &none, &verify, NULL);
		if (now() > deadline)
			DIE("no write asked for verification within %.0f s", timeout_s);
	}
	if (verify > size)
		DIE("the writer asks to verify %" PRIu64 " B of a %zu B region", verify, size);
	printf("verified_bytes %" PRIu64 " xxh3 %016" PRIx64 "\n", verify, hash(buf, verify));
	FI_CHECK(fi_close(&mr->fid));
	fab_close(&f);
	free(buf);
	return 0;
}

/* ---- main --------------------------------------------------------------------------- */

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);
	if (end == s)
		DIE("bad size %s", s);
	switch (*end) {
	case 'K': case 'k': v <<= 10; break;
	case 'M': case 'm': v <<= 20; break;
	case 'G': case 'g': v <<= 30; break;
	case '\0': break;
	default: DIE("bad size %s", s);
	}
	return v;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fi_rma_check [-p PROV] --listen IP [--port N] [--region BYTES]\n"
		"       fi_rma_check [-p PROV] --connect IP [--port N] [--total BYTES]\n"
		"       fi_rma_check [-p PROV] --url uet://FEP/JOB/PID/RI/GEN/0xKEY [--len BYTES] [--msg BYTES]\n"
		"       fi_rma_check [-p PROV] --serve [--size BYTES] [--timeout SECONDS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"provider", required_argument, NULL, 'p'}, {"listen", required_argument, NULL, 'l'},
		{"connect", required_argument, NULL, 'c'},  {"port", required_argument, NULL, 'P'},
		{"region", required_argument, NULL, 'r'},   {"total", required_argument, NULL, 't'},
		{"url", required_argument, NULL, 'u'},      {"len", required_argument, NULL, 'n'},
		{"msg", required_argument, NULL, 'm'},      {"serve", no_argument, NULL, 's'},
		{"size", required_argument, NULL, 'z'},     {"timeout", required_argument, NULL, 'T'},
		{"help", no_argument, NULL, 'h'},           {0, 0, 0, 0}};
	const char *prov = getenv("FI_PROVIDER"), *listen_ip = NULL, *connect_ip = NULL, *url = NULL;
	int port = CTL_PORT, serve = 0, c;
	uint64_t region = 128 << 20, total = UINT64_C(1) << 30, len = 64 << 20, msg = 1 << 20;
	uint64_t size = 64 << 20;
	double timeout_s = 120;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': prov = optarg; break;
		case 'l': listen_ip = optarg; break;
		case 'c': connect_ip = optarg; break;
		case 'P': port = atoi(optarg); break;
		case 'r': region = parse_size(optarg); break;
		case 't': total = parse_size(optarg); break;
		case 'u': url = optarg; break;
		case 'n': len = parse_size(optarg); break;
		case 'm': msg = parse_size(optarg); break;
		case 's': serve = 1; break;
		case 'z': size = parse_size(optarg); break;
		case 'T': timeout_s = atof(optarg); break;
		default: usage();
		}
	}
	if (listen_ip)
		return run_target(prov, listen_ip, port, region);
	if (connect_ip)
		return run_initiator(prov, connect_ip, port, total);
	if (url)
		return run_url(prov, url, len, msg, 0x75657431);
	if (serve)
		return run_serve(prov, size, timeout_s);
	usage();
	return 2;
}
