"""NeMo Gym's dataset blocks (`datasets:` of a server config), as its `config_types` models read
them: an environment's own tests validate its config's datasets with `DatasetConfig`, so the
rules are NeMo Gym's (a license for train and validation sets, one way to say where a dataset
comes from, the legacy identifiers mirrored into `source:` and back)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, Field, model_serializer, model_validator

DatasetType = Union[Literal["train"], Literal["validation"], Literal["example"]]
"""(Unions of one-value literals, as NeMo Gym types them: a refused value's errors name each.)"""

License = Union[
    Literal["Apache 2.0"],
    Literal["MIT"],
    Literal["Creative Commons Attribution 4.0 International"],
    Literal["Creative Commons Attribution-ShareAlike 4.0 International"],
    Literal["CC BY-SA 4.0"],
    Literal["CC BY-NC 3.0"],
    Literal["NVIDIA Internal Use Only, Do Not Distribute"],
    Literal["NVIDIA Evaluation Dataset License Agreement"],
    Literal["TBD"],
    Literal["GNU General Public License v3.0"],
]
"""The licenses NeMo Gym's config accepts (any other string is refused)."""


class JsonlDatasetGitlabIdentifer(BaseModel):  # (NeMo Gym's spelling)
    dataset_name: str
    version: str
    artifact_fpath: str


class JsonlDatasetHuggingFaceIdentifer(BaseModel):
    repo_id: str
    artifact_fpath: Optional[str] = None


class GitlabDatasetSource(BaseModel):
    type: Literal["gitlab"]
    dataset_name: str
    version: str
    artifact_fpath: str


class HuggingFaceDatasetSource(BaseModel):
    type: Literal["huggingface"]
    repo_id: str
    artifact_fpath: Optional[str] = None


DatasetSource = Annotated[Union[GitlabDatasetSource, HuggingFaceDatasetSource], Field(discriminator="type")]


class DatasetConfig(BaseModel):
    name: str
    type: DatasetType
    jsonl_fpath: str
    prepare_script: Optional[Path] = None
    prepare_dependencies: list[str] = Field(default_factory=list)
    taskset: Optional[str] = Field(default=None, min_length=1)
    """Which taskset the rows are materialized into (and routed by)."""
    num_repeats: int = Field(default=1, ge=1)
    source: Optional[DatasetSource] = None
    gitlab_identifier: Optional[JsonlDatasetGitlabIdentifer] = None
    huggingface_identifier: Optional[JsonlDatasetHuggingFaceIdentifer] = None
    license: Optional[License] = None

    @model_serializer(mode="wrap")
    def _without_unset_preparation(self, handler: Any) -> dict[str, Any]:
        """A block dumped back into YAML keeps no empty preparation keys (as NeMo Gym writes it)."""
        data: dict[str, Any] = handler(self)
        if self.prepare_script is None:
            data.pop("prepare_script", None)
        if not self.prepare_dependencies:
            data.pop("prepare_dependencies", None)
        return data

    @model_validator(mode="after")
    def check_train_validation_sets(self) -> DatasetConfig:
        if self.type in ("train", "validation"):  # an assertion, as NeMo Gym's: pydantic reports it as such
            assert self.license is not None, f"A license is required for {self.name}"
        return self

    @model_validator(mode="after")
    def normalize_dataset_source(self) -> DatasetConfig:
        """`source:` and the legacy identifiers say the same thing: given one way, the other is
        filled in; `source:` beside a legacy one is refused; the legacy ones warn (both may be
        given together: a primary and its fallback, which one `source:` cannot hold)."""
        legacy = [name for name in ("gitlab_identifier", "huggingface_identifier") if getattr(self, name) is not None]
        if self.source is not None:
            if legacy:
                named = ", ".join(repr(name) for name in legacy)
                raise ValueError(
                    f"Specify a dataset source once for '{self.name}': set only one of ['source', {named}]. Prefer the unified `source:` block."
                )
            fields = self.source.model_dump(exclude={"type"})
            if isinstance(self.source, GitlabDatasetSource):
                self.gitlab_identifier = JsonlDatasetGitlabIdentifer(**fields)
            else:
                self.huggingface_identifier = JsonlDatasetHuggingFaceIdentifer(**fields)
            return self
        if not legacy:
            return self
        verb = "is" if len(legacy) == 1 else "are"
        said = " and ".join(f"`{name}`" for name in legacy)
        warnings.warn(f"{said} {verb} deprecated for dataset '{self.name}'; prefer the unified `source:` block.", DeprecationWarning, stacklevel=2)
        if self.gitlab_identifier is not None and self.huggingface_identifier is None:
            self.source = GitlabDatasetSource(type="gitlab", **self.gitlab_identifier.model_dump())
        elif self.huggingface_identifier is not None and self.gitlab_identifier is None:
            self.source = HuggingFaceDatasetSource(type="huggingface", **self.huggingface_identifier.model_dump())
        return self
