"""The page around the sections: inline style, the per-task table's data (columnar JSON) and
the few lines of plain JavaScript that sort and page it, so the page needs no network."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import numpy as np
import orjson

from gym_metrics.report._data import AgentData

PAGE_ROWS = 50

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#24292f;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}header p{margin:4px 0 0;color:#c9d1d9}
nav{padding:6px 24px;background:#eaeef2;font-size:13px}nav a{margin-right:14px;color:#0550ae;text-decoration:none}
main{padding:8px 24px 40px;max-width:1280px;display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:0 16px}
section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:10px 16px;margin:14px 0;min-width:0}
section.wide{grid-column:1/-1}.tasks-grid{display:grid;grid-template-columns:auto minmax(0,1fr);gap:16px;align-items:start}
#sample{position:sticky;top:8px}
h2{font-size:17px;margin:4px 0 8px}.note{color:#57606a;font-size:12px;margin:0 0 8px}.empty{color:#57606a;font-style:italic}
table{border-collapse:collapse;margin:8px 0;font-size:13px}th,td{border-bottom:1px solid #eaeef2;padding:3px 8px;text-align:left}
table.num td{font-variant-numeric:tabular-nums}.ci{color:#57606a;font-size:12px}
.grid2{display:flex;flex-wrap:wrap;gap:0 18px}th{background:#f6f8fa}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0;font-size:11px}svg.chart text{fill:#333}svg.chart .lab{font-size:12px;fill:#57606a}
svg .ax{stroke:#888}svg .grid{stroke:#eee}svg .ref{stroke:#999;stroke-dasharray:4 3}svg .line{fill:none;stroke-width:2}
svg .band{opacity:.18}svg .whisker{stroke-width:2.5}
.verdict{font-weight:700;font-size:16px;display:inline-block;padding:3px 10px;border-radius:4px}
.v-pass{background:#dafbe1;color:#116329}.v-fail{background:#ffebe9;color:#a40e26}.v-inconclusive{background:#fff8c5;color:#7d4e00}
#task-table th{cursor:pointer;user-select:none}#task-table td.h{text-align:right;font-variant-numeric:tabular-nums;min-width:60px}
#task-table tbody tr{cursor:pointer}#task-table tbody tr:hover{outline:2px solid #0969da}
#agent-names td{word-break:break-all}.pager button{margin:0 4px}#sample pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:300px;font-size:12px;white-space:pre-wrap}
"""

JS = """
(function(){
var D=JSON.parse(document.getElementById('task-data').textContent);
var n=D.tasks.length,A=D.agents.length,page=0,size=%d,key=-1,desc=false;
D.means=D.means.map(function(m,a){var at=D.at[a];if(at===null)return m;var full=new Array(n).fill(null);
for(var j=0;j<at.length;j++)full[at[j]]=m[j];return full;});
var spread=new Float64Array(n);
for(var t=0;t<n;t++){var lo=Infinity,hi=-Infinity;for(var a=0;a<A;a++){var v=D.means[a][t];if(v!==null){lo=Math.min(lo,v);hi=Math.max(hi,v);}}spread[t]=hi>=lo?hi-lo:NaN;}
var order=new Array(n);for(var i=0;i<n;i++)order[i]=i;
function col(c,t){if(c<0)return t;if(c>=A)return spread[t];var v=D.means[c][t];return v===null?NaN:v;}
function heat(v){if(v===null||isNaN(v))return '#ddd';var s=D.hi>D.lo?Math.min(Math.max((v-D.lo)/(D.hi-D.lo),0),1):.5;
var a=[215,48,39],b=[254,224,139],c=[26,152,80],u,x,y;if(s<.5){x=a;y=b;u=s*2}else{x=b;y=c;u=s*2-1}
return 'rgb('+[0,1,2].map(function(k){return Math.round(x[k]+(y[k]-x[k])*u)}).join(',')+')';}
function fmt(v){return v===null||isNaN(v)?'':(Math.round(v*10000)/10000).toString();}
function sort(c){desc=key===c?!desc:false;key=c;order.sort(function(p,q){var x=col(c,p),y=col(c,q);
if(isNaN(x))return isNaN(y)?p-q:1;if(isNaN(y))return -1;return (desc?y-x:x-y)||p-q;});page=0;render();}
function render(){var body=document.querySelector('#task-table tbody');body.textContent='';
var pages=Math.max(1,Math.ceil(n/size));var start=page*size;
for(var r=start;r<Math.min(n,start+size);r++){var t=order[r],tr=document.createElement('tr');tr.dataset.task=D.tasks[t];
var td=document.createElement('td');td.textContent=D.tasks[t];tr.appendChild(td);
for(var a=0;a<A;a++){td=document.createElement('td');td.className='h';var v=D.means[a][t];td.textContent=fmt(v);td.style.background=heat(v);tr.appendChild(td);}
td=document.createElement('td');td.className='h';td.textContent=fmt(spread[t]);tr.appendChild(td);
tr.addEventListener('click',show.bind(null,t));body.appendChild(tr);}
document.getElementById('page-info').textContent='page '+(page+1)+' of '+pages+' ('+n+' tasks)';}
function show(t){var box=document.getElementById('sample');box.textContent='';
var h=document.createElement('h3');h.textContent='Task '+D.tasks[t];box.appendChild(h);
for(var a=0;a<A;a++){var p=document.createElement('p');p.textContent=D.agents[a]+': mean '+fmt(D.means[a][t]);box.appendChild(p);
var pre=document.createElement('pre');var s=D.samples[a][String(D.tasks[t])];
pre.textContent=s===undefined?'(sample not embedded: see group_level_metrics of task '+D.tasks[t]+' in the metrics file)':s;box.appendChild(pre);}}
document.querySelectorAll('#task-table th').forEach(function(th){th.addEventListener('click',function(){sort(+th.dataset.col);});});
document.getElementById('prev').addEventListener('click',function(){if(page>0){page--;render();}});
document.getElementById('next').addEventListener('click',function(){if((page+1)*size<n){page++;render();}});
document.getElementById('goto').addEventListener('change',function(e){var v=e.target.value.trim();for(var r=0;r<n;r++)if(D.tasks[order[r]]===v){page=Math.floor(r/size);render();show(order[r]);return;}});
render();
})();
""" % PAGE_ROWS


def task_matrix(agents: Sequence[AgentData]) -> tuple[np.ndarray, np.ndarray]:
    """(every task of any agent, ascending; agents x tasks of mean values, NaN where absent)."""
    tasks = np.unique(np.concatenate([a.tasks for a in agents])) if agents else np.zeros(0, np.int64)
    matrix = np.full((len(agents), len(tasks)), np.nan)
    for i, a in enumerate(agents):
        matrix[i, np.searchsorted(tasks, a.tasks)] = a.task_mean
    return tasks, matrix


def task_view(agents: Sequence[AgentData], tasks: np.ndarray, matrix: np.ndarray, lo: float, hi: float) -> str:
    """The sortable, paged tasks x agents table; its data as one JSON block (NaN -> null).
    An agent without every task ships its own tasks' means and their positions (`at`), not a
    row of the whole tasks x agents matrix: the block grows with the groups in the file."""
    at = [None if len(a.tasks) == len(tasks) else np.searchsorted(tasks, a.tasks) for a in agents]
    data = {
        "agents": [a.name for a in agents],
        "tasks": [str(t) for t in tasks.tolist()],  # text: JS numbers hold integers exactly only to 2^53; ascending, so a task sorts by its position
        "means": [np.round(row if p is None else row[p], 4).tolist() for row, p in zip(matrix, at)],
        "at": [None if p is None else p.tolist() for p in at],
        "lo": lo,
        "hi": hi,
        "samples": [{str(k): v for k, v in a.samples.items()} for a in agents],
    }
    # "<" only occurs inside JSON strings, where \u003c reads the same: no "</script>" or "<!--"
    text = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode().replace("<", "\\u003c")
    head = '<th data-col="-1">task</th>' + "".join(f'<th data-col="{i}">{escape(a.name)}</th>' for i, a in enumerate(agents))
    head += f'<th data-col="{len(agents)}">spread</th>'
    return (
        '<div class="pager"><button id="prev" type="button">&lt; prev</button><button id="next" type="button">next &gt;</button>'
        '<span id="page-info"></span> &nbsp; go to task <input id="goto" type="number" min="0" style="width:90px"></div>'
        f'<div class="tasks-grid"><table id="task-table"><thead><tr>{head}</tr></thead><tbody></tbody></table>'
        '<div id="sample"><p class="empty">Click a task for its sample.</p></div></div>'
        f'<script type="application/json" id="task-data">{text}</script>'
    )


def page(title: str, subtitle: str, sections: Sequence[str], extra_nav: Sequence[tuple[str, str]] = (), css: str = "") -> str:
    """One self-contained HTML document (the empty icon link stops a favicon request);
    `extra_nav` links (id, label) after the fixed ones, `css` after the page's style."""
    nav = "".join(
        f'<a href="#{sid}">{label}</a>'
        for sid, label in (("key-metrics", "Key metrics"), ("distribution", "Distribution"), ("pass-at-k", "pass@k"),
                           ("tasks", "Tasks"), ("repeats", "Repeats"), ("usage", "Usage"), ("paired", "Paired"), *extra_nav)
    )  # fmt: skip
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
        f"<title>{escape(title)}</title><style>{CSS}{css}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header><nav>{nav}</nav><main>"
        + "".join(sections)
        + f"</main><script>{JS}</script></body></html>"
    )
