/*
 * job_submit_placement.c - see job_submit_placement.h.
 *
 * Walks the nodes of the job's partition(s) (read locks held: they cannot
 * change under us), copies each node's CPUs, memory, gres and features
 * pointers into a flat array, and makes one call into the core. The core
 * only answers; this file applies the answer to the request, before
 * slurmctld validates it, so a bad answer is refused like a user's would be.
 */
#include <inttypes.h>
#include <string.h>

#include "lachesis_hook.h" /* slurm_compat.h: the release's headers */

#include "src/common/bitstring.h"
#include "src/common/log.h"
#include "src/common/macros.h"
#include "job_submit_placement.h"

/* The partition rule is job_submit_synergy.c's: none means the default
 * partition, a comma-separated list means all of them. */
static bitstr_t *_job_part_nodes(const char *parts)
{
	bitstr_t *nodes = NULL;
	part_record_t *part_ptr;

	if (!parts || !parts[0]) {
		if (default_part_loc && default_part_loc->node_bitmap)
			nodes = bit_copy(default_part_loc->node_bitmap);
		return nodes;
	}
	if (strlen(parts) > 1024)
		return NULL;	/* slurmctld refuses such a job itself */
	char *names = xstrdup(parts), *save = NULL, *tok;
	for (tok = strtok_r(names, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!(part_ptr = find_part_record(tok)) ||
		    !part_ptr->node_bitmap)
			continue;
		if (!nodes)
			nodes = bit_copy(part_ptr->node_bitmap);
		else
			bit_or(nodes, part_ptr->node_bitmap);
	}
	xfree(names);
	return nodes;
}

extern void lachesis_placement_apply(job_desc_msg_t *job_desc,
				     const char *plugin_type)
{
	lachesis_place_req_t req;
	lachesis_place_t out;
	lachesis_place_node_t *nodes = NULL;
	bitstr_t *bitmap;
	int n = 0, first, last, rc;

	bitmap = _job_part_nodes(job_desc->partition);
	if (!bitmap)
		return;
	if ((first = bit_ffs(bitmap)) >= 0) {
		last = bit_fls(bitmap);
		nodes = xcalloc(bit_set_count(bitmap), sizeof(*nodes));
		for (int i = first; i <= last; i++) {
			node_record_t *node_ptr;

			if (!bit_test(bitmap, i) ||
			    !(node_ptr = node_record_table_ptr[i]))
				continue;
			nodes[n].cpus = node_ptr->cpus;
			nodes[n].mem_mb = node_ptr->real_memory;
			nodes[n].gres = node_ptr->gres ? node_ptr->gres :
				(node_ptr->config_ptr ?
				 node_ptr->config_ptr->gres : NULL);
			nodes[n].features = node_ptr->features ?
				node_ptr->features :
				(node_ptr->config_ptr ?
				 node_ptr->config_ptr->feature : NULL);
			n++;
		}
	}
	FREE_NULL_BITMAP(bitmap);

	memset(&req, 0, sizeof(req));
	if (job_desc->min_nodes != NO_VAL)
		req.min_nodes = job_desc->min_nodes;
	if (job_desc->max_nodes != NO_VAL)
		req.max_nodes = job_desc->max_nodes;
	if (job_desc->num_tasks != NO_VAL)
		req.num_tasks = job_desc->num_tasks;
	req.name = job_desc->name;
	req.comment = job_desc->comment;
	req.partition = job_desc->partition;
	req.tres_per_job = job_desc->tres_per_job;
	req.tres_per_node = job_desc->tres_per_node;
	req.tres_per_socket = job_desc->tres_per_socket;
	req.tres_per_task = job_desc->tres_per_task;
	req.cpus_per_tres = job_desc->cpus_per_tres;
	req.mem_per_tres = job_desc->mem_per_tres;
	req.features = job_desc->features;
	req.prefer = job_desc->prefer;
	req.req_nodes = job_desc->req_nodes;

	rc = lachesis_place_job(&req, nodes, n, &out);
	xfree(nodes);
	if (rc != LACHESIS_OK) {
		/* A Lachesis failure must not cost the user their job. */
		error("%s: placement failed (code %d); job left as submitted",
		      plugin_type, rc);
		return;
	}
	if (out.prefer[0]) {
		xfree(job_desc->prefer);
		job_desc->prefer = xstrdup(out.prefer);
	}
	if (out.max_nodes)
		job_desc->max_nodes = out.max_nodes;
	lachesis_hook_append_reason(&job_desc->admin_comment, out.reason,
				    false);
	if (out.reason[0])
		debug("%s: %s", plugin_type, out.reason);
}
